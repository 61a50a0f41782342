//! Kernel signatures as declared in kernels/*.hip: the `VMAF_KERNEL` (`extern "C" __global__`)
//! entry points of a source and their parameter types, spelled as [`super::ParamType`] spells
//! them. Debug builds check every launch's argument tuple against them ([`declared`]); the
//! signature test checks every launcher module's declared tuples ([`check`], given the modules
//! by the features that own them), and the kernel-model harness checks its launches. No GPU
//! needed.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, OnceLock};

#[cfg(test)]
use super::{Signature, Signatures};
use crate::gpu::code;

/// `source` without `/* */` and `//` comments and preprocessor lines.
fn strip_comments(source: &str) -> String {
    let mut out = String::with_capacity(source.len());
    let mut rest = source;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix("/*") {
            rest = r.find("*/").map_or("", |e| &r[e + 2..]);
            out.push(' ');
        } else if let Some(r) = rest.strip_prefix("//") {
            rest = r.find('\n').map_or("", |e| &r[e..]);
        } else {
            let c = rest.chars().next().unwrap_or(' ');
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Removes every `word(...)` group (balanced parentheses), e.g. `__launch_bounds__(256, 4)`.
fn drop_call(text: &str, word: &str) -> String {
    let mut s = text.to_string();
    while let Some(at) = s.find(word) {
        let open = at + word.len();
        let tail = &s[open..];
        let start = tail.len() - tail.trim_start().len();
        if !tail[start..].starts_with('(') {
            s.replace_range(at..open, " ");
            continue;
        }
        let mut depth = 0;
        let mut end = s.len();
        for (i, c) in s[open + start..].char_indices() {
            match c {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + start + i + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        s.replace_range(at..end, " ");
    }
    s
}

/// One C parameter declaration (`const vmaf_u8 *ref`) as the launchers spell its type (`*u8`).
fn param_type(decl: &str) -> Result<String, String> {
    let pointer = decl.matches('*').count();
    let spaced = decl.replace('*', " ");
    let mut words: Vec<&str> = spaced
        .split_whitespace()
        .filter(|w| !matches!(*w, "const" | "__restrict__" | "__restrict" | "restrict"))
        .collect();
    // The last word is the parameter's name (every kernel names its parameters).
    if words.len() < 2 {
        return Err(format!("unnamed or untyped parameter `{decl}`"));
    }
    words.pop();
    let base = match words.join(" ").as_str() {
        "vmaf_u8" | "unsigned char" => "u8",
        "vmaf_i8" | "signed char" => "i8",
        "vmaf_u16" | "unsigned short" => "u16",
        "vmaf_i16" | "short" => "i16",
        "vmaf_i32" | "int" => "i32",
        "vmaf_u32" | "unsigned int" | "unsigned" => "u32",
        "vmaf_i64" | "long long" => "i64",
        "vmaf_u64" | "unsigned long long" => "u64",
        "float" => "f32",
        "double" => "f64",
        other => return Err(format!("unknown parameter type `{other}` in `{decl}`")),
    };
    match pointer {
        0 => Ok(base.to_string()),
        1 => Ok(format!("*{base}")),
        _ => Err(format!("pointer to pointer in `{decl}`")),
    }
}

/// The `VMAF_KERNEL` / `extern "C" __global__` entry points of one kernel source: name ->
/// parameter types in order.
pub(crate) fn parse_kernels(source: &str) -> Result<BTreeMap<String, Vec<String>>, String> {
    let text = strip_comments(source).replace("extern \"C\" __global__", "VMAF_KERNEL");
    let mut out = BTreeMap::new();
    for piece in text.split("VMAF_KERNEL").skip(1) {
        let head = piece
            .split('{')
            .next()
            .ok_or_else(|| "kernel without a body".to_string())?;
        let head = drop_call(&drop_call(head, "VMAF_BOUNDS"), "__launch_bounds__");
        let open = head
            .find('(')
            .ok_or_else(|| format!("no parameter list in `{}`", head.trim()))?;
        let close = head
            .rfind(')')
            .ok_or_else(|| format!("unclosed parameter list in `{}`", head.trim()))?;
        let mut words = head[..open].split_whitespace();
        if words.next() != Some("void") {
            return Err(format!("kernel not returning void: `{}`", head.trim()));
        }
        let name = words
            .next_back()
            .ok_or_else(|| format!("kernel without a name: `{}`", head.trim()))?
            .to_string();
        let params = head[open + 1..close].trim();
        let types = if params.is_empty() || params == "void" {
            Vec::new()
        } else {
            params
                .split(',')
                .map(param_type)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("{name}: {e}"))?
        };
        if out.insert(name.clone(), types).is_some() {
            return Err(format!("kernel {name} declared twice"));
        }
    }
    Ok(out)
}

/// The parameter types kernel `name` of kernels/`file`.hip declares (each source parsed once),
/// or None when it does not define it.
pub(crate) fn declared(file: &str, name: &str) -> Option<Vec<String>> {
    type Parsed = BTreeMap<String, Vec<String>>;
    static PARSED: OnceLock<Mutex<HashMap<String, Parsed>>> = OnceLock::new();
    let mut parsed = PARSED
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if !parsed.contains_key(file) {
        let source = code::embedded(file).ok()?.source;
        parsed.insert(file.to_string(), parse_kernels(source).ok()?);
    }
    parsed[file].get(name).cloned()
}

/// The kernel sources by stem (`vif` for kernels/vif.hip).
#[cfg(test)]
pub(crate) fn kernel_sources() -> BTreeMap<String, String> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels");
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).expect("kernels/ is readable") {
        let path = entry.expect("kernels/ entry").path();
        if path.extension().is_some_and(|e| e == "hip") {
            let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
            out.insert(stem, std::fs::read_to_string(&path).expect("kernel source"));
        }
    }
    out
}

/// Differences between the kernels of `source` and what launcher module `declared` lists.
#[cfg(test)]
fn compare(file: &str, source: &str, declared: Vec<Signature>) -> Result<Vec<String>, String> {
    let found = parse_kernels(source).map_err(|e| format!("kernels/{file}.hip: {e}"))?;
    let mut problems = Vec::new();
    let mut seen = BTreeMap::new();
    for (name, types) in declared {
        if seen.insert(name, ()).is_some() {
            problems.push(format!(
                "{file}: {name} declared twice by its launcher module"
            ));
        }
        match found.get(name) {
            None => problems.push(format!(
                "{file}: launchers declare {name}, which kernels/{file}.hip does not define"
            )),
            Some(c) if *c != types => problems.push(format!(
                "{file}: {name} takes ({}) in kernels/{file}.hip but its launcher passes ({})",
                c.join(", "),
                types.join(", ")
            )),
            Some(_) => {}
        }
    }
    for name in found.keys() {
        if !seen.contains_key(name.as_str()) {
            problems.push(format!(
                "{file}: kernels/{file}.hip defines {name}, which no launcher declares"
            ));
        }
    }
    Ok(problems)
}

/// Compares the launcher modules `modules` (kernel source stem, its declared signatures) with
/// kernels/*.hip: every source has a module and every module a source, and per source the same
/// kernels with the same parameter types in the same order. Returns the problems and the number
/// of kernels checked.
#[cfg(test)]
pub(crate) fn check(modules: &[(&str, Signatures)]) -> (Vec<String>, usize) {
    let sources = kernel_sources();
    let mut problems = Vec::new();
    if sources.is_empty() {
        problems.push("no kernels/*.hip found".to_string());
    }
    let mut kernels = 0;
    for (file, source) in &sources {
        let Some((_, sigs)) = modules.iter().find(|(m, _)| m == file) else {
            problems.push(format!("kernels/{file}.hip has no launcher module"));
            continue;
        };
        kernels += sigs().len();
        match compare(file, source, sigs()) {
            Ok(p) => problems.extend(p),
            Err(e) => problems.push(e),
        }
    }
    for (m, _) in modules {
        if !sources.contains_key(*m) {
            problems.push(format!("launcher module {m} has no kernels/{m}.hip"));
        }
    }
    (problems, kernels)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parser_reads_bounds_templates_and_comments() {
        let src = r#"
            #define VMAF_KERNEL_LIKE 1
            template <typename T> VMAF_DEVICE void helper(const T *a, int n) {}
            /* VMAF_KERNEL void commented_out(int x) {} */
            VMAF_KERNEL void VMAF_BOUNDS(256, 4) k_a(const vmaf_u16 *a, // trailing
                                                     int n, double e, vmaf_u64 *out)
            {
                helper<vmaf_u16>(a, n);
            }
            extern "C" __global__ void __launch_bounds__(128) k_b(const float *__restrict__ p,
                                                                   long long plane) {}
        "#;
        let k = parse_kernels(src).unwrap();
        assert_eq!(k.len(), 2, "{k:?}");
        assert_eq!(k["k_a"], ["*u16", "i32", "f64", "*u64"]);
        assert_eq!(k["k_b"], ["*f32", "i64"]);
    }

    #[test]
    fn mismatches_are_reported() {
        let src = "VMAF_KERNEL void k(const vmaf_u8 *a, int n, vmaf_u64 *out) {}";
        let t = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let ok = compare("x", src, vec![("k", t(&["*u8", "i32", "*u64"]))]).unwrap();
        assert!(ok.is_empty(), "{ok:?}");
        for wrong in [
            vec![("k", t(&["*u8", "i32"]))],                // removed
            vec![("k", t(&["*u8", "i32", "*u64", "i32"]))], // added
            vec![("k", t(&["*u8", "u32", "*u64"]))],        // retyped
            vec![("k", t(&["*u8", "*u64", "i32"]))],        // reordered
            vec![("j", t(&["*u8", "i32", "*u64"]))],        // renamed
            vec![],                                         // undeclared
        ] {
            assert!(
                !compare("x", src, wrong.clone()).unwrap().is_empty(),
                "{wrong:?}"
            );
        }
    }
}
