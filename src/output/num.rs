//! Number printing exactly as libvmaf's writers do it with glibc's `printf`.

/// Number of zero digits right after the decimal point of `|x|` (libvmaf's
/// `count_leading_zeros_d`), computed with the same double arithmetic.
pub fn leading_zeros(x: f64) -> u32 {
    let x = if x < 0.0 { -x } else { x };
    // C truncates with `(int)x`. On x86 an out-of-range or NaN operand yields INT_MIN, which
    // makes the "fraction" huge (or NaN) and the count 0; Rust's saturating `as` would not.
    let int_part = if x.is_nan() || x >= 2_147_483_648.0 {
        i32::MIN
    } else {
        x as i32
    };
    let mut frac = x - f64::from(int_part);
    let mut n = 0;
    while frac < 1.0 && frac != 0.0 {
        frac *= 10.0;
        n += 1;
    }
    n
}

/// `printf("%.<prec>f", x)` as glibc prints it, including `inf`, `-inf`, `nan` and `-nan`.
pub fn fixed(x: f64, prec: usize) -> String {
    if x.is_nan() {
        // glibc shows the sign bit of a NaN.
        if x.is_sign_negative() { "-nan" } else { "nan" }.to_string()
    } else if x.is_infinite() {
        if x < 0.0 { "-inf" } else { "inf" }.to_string()
    } else {
        // Rust's fixed-precision formatting is exact and rounds ties to even, like glibc's, and
        // keeps the sign of negative zero.
        format!("{x:.prec$}")
    }
}

/// A score as the writers print it: `%.6f`, or `%.16f` when more than six zeros follow the
/// decimal point (so tiny values do not collapse to zero).
pub fn value(x: f64) -> String {
    fixed(x, if leading_zeros(x) <= 6 { 6 } else { 16 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sixteen_decimals_only_past_six_leading_zeros() {
        assert_eq!(leading_zeros(1e-7), 7);
        assert_eq!(value(1e-7), "0.0000001000000000");
        // The fraction is just below 1e-8: nine multiplications by ten.
        assert_eq!(leading_zeros(1.00000001), 9);
        assert_eq!(value(1.00000001), "1.0000000099999999");
        assert_eq!(value(-1e-7), "-0.0000001000000000");
        assert_eq!(leading_zeros(1e-6), 6);
        assert_eq!(value(1e-6), "0.000001");
        assert_eq!(value(0.0), "0.000000");
        assert_eq!(value(42.0), "42.000000");
        assert_eq!(value(70.518294), "70.518294");
        assert_eq!(value(0.0078125), "0.007812");
        assert_eq!(value(3e-8), "0.0000000300000000");
        // Above i32 range the C cast gives INT_MIN, so no fraction is seen.
        assert_eq!(leading_zeros(3_000_000_000.000_000_5), 0);
    }

    #[test]
    fn special_values_print_like_glibc() {
        assert_eq!(value(f64::INFINITY), "inf");
        assert_eq!(value(f64::NEG_INFINITY), "-inf");
        assert_eq!(value(f64::NAN), "nan");
        assert_eq!(value(-f64::NAN), "-nan");
        assert_eq!(value(-0.0), "-0.000000");
        assert_eq!(fixed(-1e-9, 6), "-0.000000");
        assert_eq!(fixed(43.645, 2), "43.65");
        assert_eq!(fixed(0.125, 2), "0.12");
    }
}
