//! Extractor options: the string dictionary libvmaf passes around, typed option tables, and the
//! option-dependent feature names (`integer_adm2_egl_1`).

use crate::error::{Error, Result};
use crate::feature::alias::alias;

/// An ordered string dictionary, like libvmaf's `VmafDictionary`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Dict {
    entries: Vec<(String, String)>,
}

impl Dict {
    /// An empty dictionary.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `key`, replacing an existing value. Numeric values are normalised the way libvmaf does
    /// (parsed as `f32`, printed with `%g`), so `"1.20000001"` becomes `"1.2"`.
    pub fn set(&mut self, key: &str, val: &str) {
        let val = normalize_value(val);
        if let Some(e) = self.entries.iter_mut().find(|(k, _)| k == key) {
            e.1 = val;
        } else {
            self.entries.push((key.to_string(), val));
        }
    }

    /// Sets `key` only if absent; an existing different value is an error (libvmaf's
    /// DO_NOT_OVERWRITE merge).
    pub fn set_no_overwrite(&mut self, key: &str, val: &str) -> Result<()> {
        let val = normalize_value(val);
        match self.entries.iter().find(|(k, _)| k == key) {
            Some((_, v)) if *v == val => Ok(()),
            Some((_, v)) => Err(Error::inval(format!(
                "option {key}: conflicting values {v} and {val}"
            ))),
            None => {
                self.entries.push((key.to_string(), val));
                Ok(())
            }
        }
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.entries
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Entries in insertion order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// libvmaf's numeric normalisation: if the string starts with a number (`strtof`), replace it by
/// `%g` of that float; otherwise keep it verbatim.
pub fn normalize_value(val: &str) -> String {
    match parse_float_prefix(val) {
        Some((v, _)) => fmt_g(v as f32 as f64),
        None => val.to_string(),
    }
}

/// Parses the longest decimal floating-point prefix (after leading whitespace), like `strtod`.
/// Returns the value and the number of bytes consumed, or `None` when no number starts the string.
pub fn parse_float_prefix(s: &str) -> Option<(f64, usize)> {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() && (b[i] as char).is_ascii_whitespace() {
        i += 1;
    }
    let start = i;
    if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
        i += 1;
    }
    // inf / nan
    let rest = &s[i..];
    for word in ["infinity", "inf", "nan"] {
        if rest.len() >= word.len() && rest[..word.len()].eq_ignore_ascii_case(word) {
            let end = i + word.len();
            let v: f64 = s[start..end].to_ascii_lowercase().parse().ok()?;
            return Some((v, end));
        }
    }
    let mut digits = 0;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
        digits += 1;
    }
    if i < b.len() && b[i] == b'.' {
        i += 1;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
            digits += 1;
        }
    }
    if digits == 0 {
        return None;
    }
    let mut end = i;
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        let mut j = i + 1;
        if j < b.len() && (b[j] == b'+' || b[j] == b'-') {
            j += 1;
        }
        let exp_start = j;
        while j < b.len() && b[j].is_ascii_digit() {
            j += 1;
        }
        if j > exp_start {
            end = j;
        }
    }
    let text = &s[start..end];
    let text = text.strip_suffix('.').unwrap_or(text);
    let v: f64 = text.parse().ok()?;
    Some((v, end))
}

/// `atof`: the float prefix or 0.
pub fn atof(s: &str) -> f64 {
    parse_float_prefix(s).map(|(v, _)| v).unwrap_or(0.0)
}

/// `atoi`: the integer prefix (saturating) or 0.
pub fn atoi(s: &str) -> i32 {
    let t = s.trim_start();
    let (neg, digits) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let mut v: i64 = 0;
    for c in digits.bytes() {
        if !c.is_ascii_digit() {
            break;
        }
        v = (v * 10 + (c - b'0') as i64).min(i64::from(i32::MAX) + 1);
    }
    let v = if neg { -v } else { v };
    v.clamp(i32::MIN as i64, i32::MAX as i64) as i32
}

/// C's `printf("%g", x)`: 6 significant digits, trailing zeros removed, exponent form when the
/// exponent is < -4 or >= 6.
pub fn fmt_g(x: f64) -> String {
    if x.is_nan() {
        return if x.is_sign_negative() { "-nan" } else { "nan" }.to_string();
    }
    if x.is_infinite() {
        return if x < 0.0 { "-inf" } else { "inf" }.to_string();
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0" } else { "0" }.to_string();
    }
    let sci = format!("{:.5e}", x);
    let (mant, exp) = sci.split_once('e').expect("exponent");
    let exp: i32 = exp.parse().expect("exponent digits");
    if !(-4..6).contains(&exp) {
        let mant = strip_zeros(mant);
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mant}e{sign}{:02}", exp.abs())
    } else {
        let prec = (5 - exp) as usize;
        strip_zeros(&format!("{:.*}", prec, x)).to_string()
    }
}

fn strip_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// The type and default of one option.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum OptValue {
    Bool(bool),
    Int(i32),
    Double(f64),
}

/// One entry of an extractor's option table (libvmaf's `VmafOption`).
#[derive(Debug, Clone, Copy)]
pub struct OptSpec {
    /// Key looked up in the dictionary.
    pub name: &'static str,
    /// Short key used in option-dependent feature names.
    pub alias: Option<&'static str>,
    /// Default value; also fixes the type.
    pub default: OptValue,
    /// Inclusive range for numbers.
    pub min: f64,
    pub max: f64,
    /// Whether a non-default value changes the stored feature names.
    pub feature_param: bool,
}

impl OptSpec {
    /// A bool option.
    pub const fn boolean(
        name: &'static str,
        alias: Option<&'static str>,
        default: bool,
        feature_param: bool,
    ) -> Self {
        OptSpec {
            name,
            alias,
            default: OptValue::Bool(default),
            min: 0.0,
            max: 1.0,
            feature_param,
        }
    }
    /// An int option.
    pub const fn int(
        name: &'static str,
        alias: Option<&'static str>,
        default: i32,
        min: f64,
        max: f64,
        feature_param: bool,
    ) -> Self {
        OptSpec {
            name,
            alias,
            default: OptValue::Int(default),
            min,
            max,
            feature_param,
        }
    }
    /// A double option.
    pub const fn double(
        name: &'static str,
        alias: Option<&'static str>,
        default: f64,
        min: f64,
        max: f64,
        feature_param: bool,
    ) -> Self {
        OptSpec {
            name,
            alias,
            default: OptValue::Double(default),
            min,
            max,
            feature_param,
        }
    }
}

/// Parsed option values of one extractor instance, in table order.
#[derive(Debug, Clone)]
pub struct Opts {
    specs: &'static [OptSpec],
    values: Vec<OptValue>,
}

impl Opts {
    /// Parses `dict` against `specs` as libvmaf does: bools are exactly `true`/`false`, ints via
    /// `atoi`, doubles via `atof`, a zero result from text not starting with `0` is an error, and
    /// numbers are range-checked; unlike libvmaf, a NaN is refused too. Unknown keys are ignored.
    pub fn parse(specs: &'static [OptSpec], dict: &Dict) -> Result<Self> {
        let mut values = Vec::with_capacity(specs.len());
        for spec in specs {
            let v = match dict.get(spec.name) {
                None => spec.default,
                Some(s) => parse_one(spec, s)?,
            };
            values.push(v);
        }
        Ok(Opts { specs, values })
    }

    fn find(&self, name: &str) -> OptValue {
        let i = self
            .specs
            .iter()
            .position(|s| s.name == name)
            .unwrap_or_else(|| panic!("no option {name}"));
        self.values[i]
    }

    /// A bool option's value (panics if `name` is not a bool option of the table).
    pub fn bool(&self, name: &str) -> bool {
        match self.find(name) {
            OptValue::Bool(b) => b,
            v => panic!("option {name} is {v:?}"),
        }
    }

    /// An int option's value.
    pub fn int(&self, name: &str) -> i32 {
        match self.find(name) {
            OptValue::Int(i) => i,
            v => panic!("option {name} is {v:?}"),
        }
    }

    /// A double option's value.
    pub fn double(&self, name: &str) -> f64 {
        match self.find(name) {
            OptValue::Double(d) => d,
            v => panic!("option {name} is {v:?}"),
        }
    }

    /// The stored name of feature `full_name` under these options: unchanged when every feature
    /// parameter has its default, else `alias(full_name)` followed by, for each non-default
    /// feature parameter sorted by option name, `_key` (bools) or `_key_value` (value `%d` for
    /// ints, `%g` for doubles), key being the option's alias or name.
    pub fn feature_name(&self, full_name: &str) -> String {
        self.feature_name_with(full_name, &[])
    }

    /// [`Opts::feature_name`] for an extractor that also has string options (kept out of the
    /// typed table): `strings` lists `(option name, key, value)` for each one whose value is
    /// not its default; they sort among the others by option name and add `_key_value`.
    pub fn feature_name_with(&self, full_name: &str, strings: &[(&str, &str, &str)]) -> String {
        let mut params: Vec<(&str, String)> = self
            .specs
            .iter()
            .zip(&self.values)
            .filter(|(s, v)| s.feature_param && **v != s.default)
            .map(|(spec, v)| {
                let key = spec.alias.unwrap_or(spec.name);
                let part = match v {
                    OptValue::Bool(_) => format!("_{key}"),
                    OptValue::Int(i) => format!("_{key}_{i}"),
                    OptValue::Double(d) => format!("_{key}_{}", fmt_g(*d)),
                };
                (spec.name, part)
            })
            .collect();
        params.extend(
            strings
                .iter()
                .map(|&(name, key, val)| (name, format!("_{key}_{val}"))),
        );
        if params.is_empty() {
            return full_name.to_string();
        }
        params.sort_by(|a, b| a.0.cmp(b.0));
        let mut out = alias(full_name).to_string();
        for (_, part) in params {
            out.push_str(&part);
        }
        out
    }
}

fn parse_one(spec: &OptSpec, s: &str) -> Result<OptValue> {
    let bad = || Error::inval(format!("bad value {s:?} for option {}", spec.name));
    match spec.default {
        OptValue::Bool(_) => match s {
            "true" => Ok(OptValue::Bool(true)),
            "false" => Ok(OptValue::Bool(false)),
            _ => Err(bad()),
        },
        OptValue::Int(_) => {
            let n = atoi(s);
            if (n == 0 && !s.starts_with('0')) || (n as f64) < spec.min || (n as f64) > spec.max {
                return Err(bad());
            }
            Ok(OptValue::Int(n))
        }
        OptValue::Double(_) => {
            let n = atof(s);
            // NaN passes libvmaf's range check and then computes scores no finite setting
            // gives; infinities are refused there already (every table's bounds are finite).
            if !n.is_finite() {
                return Err(Error::inval(format!(
                    "bad value {s:?} for option {}: not a finite number",
                    spec.name
                )));
            }
            if (n == 0.0 && !s.starts_with('0')) || n < spec.min || n > spec.max {
                return Err(bad());
            }
            Ok(OptValue::Double(n))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn g_format_matches_printf() {
        assert_eq!(fmt_g(1.0), "1");
        assert_eq!(fmt_g(1.2), "1.2");
        assert_eq!(fmt_g(100.0), "100");
        assert_eq!(fmt_g(0.03125), "0.03125");
        assert_eq!(fmt_g(1234567.0), "1.23457e+06");
        assert_eq!(fmt_g(0.0001), "0.0001");
        assert_eq!(fmt_g(0.00001), "1e-05");
        assert_eq!(fmt_g(1.2f32 as f64), "1.2");
        assert_eq!(fmt_g(999999.5), "1e+06");
    }

    #[test]
    fn normalisation_rounds_to_float_and_six_digits() {
        assert_eq!(normalize_value("1.0"), "1");
        assert_eq!(normalize_value("1.23456789"), "1.23457");
        assert_eq!(normalize_value("true"), "true");
        assert_eq!(normalize_value("0.5abc"), "0.5");
    }

    static SPECS: [OptSpec; 2] = [
        OptSpec::double("vif_enhn_gain_limit", Some("egl"), 100.0, 1.0, 100.0, true),
        OptSpec::boolean("debug", None, false, false),
    ];

    #[test]
    fn names_follow_non_default_params() {
        let mut d = Dict::new();
        let o = Opts::parse(&SPECS, &d).unwrap();
        assert_eq!(
            o.feature_name("VMAF_integer_feature_vif_scale0_score"),
            "VMAF_integer_feature_vif_scale0_score"
        );
        d.set("vif_enhn_gain_limit", "1.0");
        let o = Opts::parse(&SPECS, &d).unwrap();
        assert_eq!(
            o.feature_name("VMAF_integer_feature_vif_scale0_score"),
            "integer_vif_scale0_egl_1"
        );
        d.set("vif_enhn_gain_limit", "0.5");
        assert!(Opts::parse(&SPECS, &d).is_err());
        let mut d = Dict::new();
        d.set("debug", "yes");
        assert!(Opts::parse(&SPECS, &d).is_err());
    }

    /// libvmaf takes a NaN (it passes the range check); here every non-finite value is refused,
    /// in any spelling `strtod` reads.
    #[test]
    fn non_finite_values_are_refused() {
        for v in [
            "nan", "NaN", "-nan", "nan(0x1)", " nan", "inf", "-inf", "Infinity", "1e999",
        ] {
            let mut d = Dict::new();
            d.set("vif_enhn_gain_limit", v);
            let e = Opts::parse(&SPECS, &d).unwrap_err().to_string();
            assert!(
                e.contains("vif_enhn_gain_limit: not a finite number"),
                "{v}: {e}"
            );
        }
        let mut d = Dict::new();
        d.set("vif_enhn_gain_limit", "1e2");
        assert_eq!(
            Opts::parse(&SPECS, &d)
                .unwrap()
                .double("vif_enhn_gain_limit"),
            100.0
        );
    }
}
