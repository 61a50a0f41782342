//! `feature.h`: option dictionaries for feature extractors and model overloads.

use std::ffi::{c_char, c_int};

use crate::ffi::{c_str, ffi_boundary, non_null};

/// Opaque ordered key/value dictionary of extractor options.
pub type VmafFeatureDictionary = crate::feature::Dict;

/// Sets `key` to `val` in `*dict`, creating the dictionary when `*dict` is NULL and replacing an
/// existing value. Numeric values are stored rounded to `float` and printed with `%g`
/// (`"1.20000001"` becomes `"1.2"`), as extractors see them.
/// Returns 0, or -EINVAL when `dict`, `key` or `val` is NULL (or not UTF-8).
///
/// # Safety
/// `dict` is NULL or points to a NULL or live dictionary pointer; `key` and `val` are NULL or
/// NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn vmaf_feature_dictionary_set(
    dict: *mut *mut VmafFeatureDictionary,
    key: *const c_char,
    val: *const c_char,
) -> c_int {
    ffi_boundary!("vmaf_feature_dictionary_set", {
        non_null(dict, "dictionary pointer")?;
        // SAFETY: NULL or NUL-terminated strings (caller's contract).
        let (key, val) = unsafe { (c_str(key, "key")?, c_str(val, "value")?) };
        // SAFETY: non-NULL pointer to a NULL or live dictionary handle (caller's contract).
        let slot = unsafe { &mut *dict };
        if slot.is_null() {
            *slot = Box::into_raw(Box::default());
        }
        // SAFETY: a live handle from Box::into_raw.
        unsafe { &mut **slot }.set(key, val);
        Ok(())
    })
}

/// Frees `*dict` (if any) and sets it to NULL. Returns 0, or -EINVAL when `dict` is NULL.
///
/// # Safety
/// `dict` is NULL or points to a NULL or live dictionary pointer.
#[no_mangle]
pub unsafe extern "C" fn vmaf_feature_dictionary_free(
    dict: *mut *mut VmafFeatureDictionary,
) -> c_int {
    ffi_boundary!("vmaf_feature_dictionary_free", {
        non_null(dict, "dictionary pointer")?;
        // SAFETY: non-NULL pointer to a NULL or live handle (caller's contract).
        let slot = unsafe { &mut *dict };
        // SAFETY: taken from the slot, so it is freed exactly once.
        unsafe { take_dict(std::mem::replace(slot, std::ptr::null_mut())) };
        Ok(())
    })
}

/// Takes ownership of a dictionary handle (NULL gives an empty dictionary).
///
/// # Safety
/// `d` is NULL or a live handle from this module that the caller gives up.
pub(crate) unsafe fn take_dict(d: *mut VmafFeatureDictionary) -> crate::feature::Dict {
    if d.is_null() {
        crate::feature::Dict::default()
    } else {
        // SAFETY: a live handle created by Box::into_raw in vmaf_feature_dictionary_set.
        *unsafe { Box::from_raw(d) }
    }
}
