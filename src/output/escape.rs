//! Name escaping for the writers, so any model or feature name gives a parseable file.
//!
//! Upstream prints names verbatim. Every function here returns its input unchanged (borrowed)
//! for the names libvmaf itself produces (letters, digits, `_`, `-`, `.`), so normal output
//! stays byte-identical; only names that would break the file's syntax are rewritten.

use std::borrow::Cow;
use std::fmt::Write;

/// The contents of a JSON string literal (without the quotes): `"` and `\` escaped, control
/// characters as `\n`, `\t`, ... or `\u00XX`. Other characters, non-ASCII included, are
/// written as they are (JSON text is UTF-8).
pub fn json_str(s: &str) -> Cow<'_, str> {
    if !s.chars().any(|c| c == '"' || c == '\\' || c < ' ') {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if c < ' ' => {
                // Writing into a String cannot fail.
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Whether XML 1.0 can hold `c` at all (its `Char` production).
fn xml_char(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{d7ff}' | '\u{e000}'..='\u{fffd}' | '\u{10000}'..)
}

/// An XML attribute value (between double quotes): `&`, `<`, `>`, `"` and `'` as entities, tab
/// and line breaks as character references (so parsers do not normalise them to spaces), and
/// the characters XML 1.0 cannot represent at all (other C0 controls, U+FFFE, U+FFFF) replaced
/// by U+FFFD.
pub fn xml_attr_value(s: &str) -> Cow<'_, str> {
    if s.chars()
        .all(|c| xml_char(c) && !matches!(c, '&' | '<' | '>' | '"' | '\'' | '\t' | '\n' | '\r'))
    {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' => out.push_str("&#9;"),
            '\n' => out.push_str("&#10;"),
            '\r' => out.push_str("&#13;"),
            c if !xml_char(c) => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Characters kept as they are in an XML attribute name: ASCII letters and `_` anywhere, ASCII
/// digits, `-` and `.` after the first character. Everything else (`:` included, which
/// namespace-aware parsers would read as a prefix) is encoded.
fn plain_name_char(c: char, first: bool) -> bool {
    c.is_ascii_alphabetic() || c == '_' || (!first && (c.is_ascii_digit() || c == '-' || c == '.'))
}

/// Whether `s` at byte `i` starts an `_xHHHH_` or `_xHHHHHHHH_` escape sequence.
fn looks_escaped(s: &str, i: usize) -> bool {
    let rest = &s.as_bytes()[i..];
    let hex_run = |n: usize| {
        rest.len() >= n + 3
            && rest[1] == b'x'
            && rest[2..n + 2].iter().all(u8::is_ascii_hexdigit)
            && rest[n + 2] == b'_'
    };
    rest.first() == Some(&b'_') && (hex_run(4) || hex_run(8))
}

/// An XML attribute name. Names made of ASCII letters, digits, `_`, `-` and `.` that start
/// with a letter or `_` are unchanged. Any other character becomes `_xHHHH_` (`_xHHHHHHHH_`
/// above U+FFFF), its code point in upper-case hex, as .NET's `XmlConvert.EncodeName` does; an
/// `_` that would itself read as the start of such a sequence is encoded as `_x005F_`, so
/// distinct names stay distinct. The empty name becomes `_`.
pub fn xml_attr_name(s: &str) -> Cow<'_, str> {
    let clean = s
        .char_indices()
        .all(|(i, c)| plain_name_char(c, i == 0) && !(c == '_' && looks_escaped(s, i)));
    if clean && !s.is_empty() {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    if s.is_empty() {
        out.push('_');
    }
    for (i, c) in s.char_indices() {
        if plain_name_char(c, i == 0) && !(c == '_' && looks_escaped(s, i)) {
            out.push(c);
        } else if (c as u32) <= 0xffff {
            // Writing into a String cannot fail.
            let _ = write!(out, "_x{:04X}_", c as u32);
        } else {
            let _ = write!(out, "_x{:08X}_", c as u32);
        }
    }
    Cow::Owned(out)
}

/// A CSV field: quoted (with `"` doubled) when it holds a comma, a quote or a line break, as
/// RFC 4180 has it; otherwise unchanged.
pub fn csv_field(s: &str) -> Cow<'_, str> {
    if !s.contains([',', '"', '\n', '\r']) {
        return Cow::Borrowed(s);
    }
    Cow::Owned(format!("\"{}\"", s.replace('"', "\"\"")))
}

#[cfg(test)]
mod tests {
    use super::*;

    const NORMAL: &[&str] = &[
        "vmaf",
        "integer_vif_scale0",
        "integer_adm2_egl_1.2",
        "psnr_cb",
        "vmaf_bagging",
        "float_ms_ssim",
        "integer_motion2",
        "cambi_full_reference",
        "apsnr_y",
        "vmaf_v0.6.1neg",
        "x-y",
    ];

    #[test]
    fn normal_names_are_borrowed_unchanged() {
        for n in NORMAL {
            assert!(matches!(json_str(n), Cow::Borrowed(b) if b == *n), "{n}");
            assert!(
                matches!(xml_attr_value(n), Cow::Borrowed(b) if b == *n),
                "{n}"
            );
            assert!(
                matches!(xml_attr_name(n), Cow::Borrowed(b) if b == *n),
                "{n}"
            );
            assert!(matches!(csv_field(n), Cow::Borrowed(b) if b == *n), "{n}");
        }
    }

    #[test]
    fn json_escapes_quotes_backslashes_and_controls() {
        let cases = [
            ("a\"b", "a\\\"b"),
            ("a\\b", "a\\\\b"),
            ("l1\nl2\r\t", "l1\\nl2\\r\\t"),
            ("\u{1}\u{8}\u{c}\u{1f}", "\\u0001\\b\\f\\u001f"),
            ("<&>é\u{7f}", "<&>é\u{7f}"),
            ("", ""),
        ];
        for (raw, want) in cases {
            assert_eq!(json_str(raw), want, "{raw:?}");
            // And it round-trips through a JSON parser.
            let doc = format!("{{\"{}\": 1}}", json_str(raw));
            let v: serde_json::Value = serde_json::from_str(&doc).unwrap();
            assert_eq!(v[raw], 1, "{doc}");
        }
    }

    #[test]
    fn xml_values_use_entities() {
        assert_eq!(
            xml_attr_value("a\"b<c>&d'e"),
            "a&quot;b&lt;c&gt;&amp;d&apos;e"
        );
        assert_eq!(xml_attr_value("t\tn\nr\r"), "t&#9;n&#10;r&#13;");
        assert_eq!(
            xml_attr_value("\u{0}x\u{1b}\u{fffe}é"),
            "\u{fffd}x\u{fffd}\u{fffd}é"
        );
    }

    #[test]
    fn xml_names_are_encoded() {
        let cases = [
            ("a\"b", "a_x0022_b"),
            ("<&>", "_x003C__x0026__x003E_"),
            ("1vmaf", "_x0031_vmaf"),
            ("-x", "_x002D_x"),
            ("ns:name", "ns_x003A_name"),
            ("my model", "my_x0020_model"),
            ("egl_1e+06", "egl_1e_x002B_06"),
            ("é", "_x00E9_"),
            ("🎬", "_x0001F3AC_"),
            ("", "_"),
            // An underscore that looks like an escape is itself escaped: no collisions.
            ("a_x0022_b", "a_x005F_x0022_b"),
            ("a_x0022", "a_x0022"),
            ("_x12345678_", "_x005F_x12345678_"),
        ];
        for (raw, want) in cases {
            assert_eq!(xml_attr_name(raw), want, "{raw:?}");
        }
        assert_ne!(xml_attr_name("a\"b"), xml_attr_name("a_x0022_b"));
    }

    #[test]
    fn csv_quotes_when_needed() {
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("a\"b"), "\"a\"\"b\"");
        assert_eq!(csv_field("a\nb"), "\"a\nb\"");
        assert_eq!(csv_field("<&>"), "<&>");
    }
}
