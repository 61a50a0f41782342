//! No import cycles between the library's rooms: each feature folder (`src/feature/<f>/`) is one
//! room, every other file under src/ another (`src/gpu/graph.rs` is `gpu/graph`, a `mod.rs` its
//! folder's room). A room depends on another when its code names a path there, spelled from the
//! crate root (`crate::gpu::job::Queued`, in a `use` or inline) or from a parent (`super::...`).
//! Test code (`#[cfg(test)]` items and the files of `#[cfg(test)]` modules) is left out, and so is
//! the CLI (cli/, another package). A parent module reaching its children by their bare names
//! (`vif::Vif` in feature/mod.rs) is containment, not counted.
//!
//! `cargo test --release --test rooms -- --nocapture` prints the rooms, the dependencies and
//! the cycles, which must be 0.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// `source` with comments, string and character literals blanked out (lifetimes kept).
fn code_only(source: &str) -> String {
    let c: Vec<char> = source.chars().collect();
    let mut out = String::with_capacity(source.len());
    let mut i = 0;
    while i < c.len() {
        let next = c.get(i + 1).copied();
        if c[i] == '/' && next == Some('/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if c[i] == '/' && next == Some('*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if c[i] == 'r' && (next == Some('"') || next == Some('#')) && !word_before(&c, i) {
            // A raw string: r"..." or r#"..."#.
            let hashes = c[i + 1..].iter().take_while(|&&h| h == '#').count();
            if c.get(i + 1 + hashes) != Some(&'"') {
                out.push(c[i]);
                i += 1;
                continue;
            }
            i += 2 + hashes;
            while i < c.len() {
                if c[i] == '"'
                    && c[i + 1..]
                        .iter()
                        .take(hashes)
                        .filter(|&&h| h == '#')
                        .count()
                        == hashes
                {
                    i += 1 + hashes;
                    break;
                }
                i += 1;
            }
            out.push_str("\"\"");
        } else if c[i] == '"' {
            i += 1;
            while i < c.len() && c[i] != '"' {
                i += if c[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if c[i] == '\'' && (next == Some('\\') || c.get(i + 2) == Some(&'\'')) {
            // A character literal (a lifetime has no closing quote after one character).
            i += 1;
            while i < c.len() && c[i] != '\'' {
                i += if c[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("' '");
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

fn word_before(c: &[char], i: usize) -> bool {
    i > 0 && (c[i - 1].is_alphanumeric() || c[i - 1] == '_')
}

/// `code` without its `#[cfg(test)]` items, and the names of the `#[cfg(test)] mod x;` files.
fn without_tests(code: &str) -> (String, Vec<String>) {
    const ATTR: &str = "#[cfg(test)]";
    let mut out = String::new();
    let mut test_mods = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find(ATTR) {
        out.push_str(&rest[..at]);
        let item = &rest[at + ATTR.len()..];
        // The item ends at its first `;` outside braces, or with the braces it opens.
        let (semi, brace) = (item.find(';'), item.find('{'));
        let end = match (semi, brace) {
            (Some(s), b) if b.is_none_or(|b| s < b) => {
                let head = item[..s].split_whitespace().collect::<Vec<_>>();
                if let Some(p) = head.iter().position(|w| *w == "mod") {
                    test_mods.push(head[p + 1].to_string());
                }
                s + 1
            }
            (_, Some(b)) => {
                let mut depth = 0;
                let mut end = item.len();
                for (k, ch) in item[b..].char_indices() {
                    match ch {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = b + k + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                end
            }
            _ => item.len(),
        };
        rest = &item[end..];
    }
    out.push_str(rest);
    (out, test_mods)
}

/// Every path named in `code` from the crate root or a parent, as module path segments (the
/// items of a `{...}` group each give one).
fn named_paths(code: &str, module: &[String]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    for start in ["crate::", "super::"] {
        let mut from = 0;
        while let Some(at) = code[from..].find(start).map(|k| k + from) {
            from = at + start.len();
            if at > 0 && (bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_') {
                continue;
            }
            if at >= 2 && &code[at - 2..at] == "::" {
                // The second `super` of `super::super::`.
                continue;
            }
            // The whole path, with its `::{...}` groups.
            let mut end = code.len();
            let mut depth = 0;
            for (k, ch) in code[at..].char_indices() {
                let part = match ch {
                    '{' if depth > 0 || code[..at + k].ends_with("::") => {
                        depth += 1;
                        true
                    }
                    '}' if depth > 0 => {
                        depth -= 1;
                        true
                    }
                    c if c.is_alphanumeric() || c == '_' || c == ':' || c == '*' => true,
                    // Inside a group, separators and `as` belong to it.
                    _ => depth > 0,
                };
                if !part {
                    end = at + k;
                    break;
                }
            }
            let text = &code[at..end];
            let (base, tail) = if let Some(t) = text.strip_prefix("crate::") {
                (Vec::new(), t)
            } else {
                let mut t = text;
                let mut up = 0;
                while let Some(r) = t.strip_prefix("super::") {
                    up += 1;
                    t = r;
                }
                (module[..module.len().saturating_sub(up)].to_vec(), t)
            };
            for path in expand(tail) {
                let mut full = base.clone();
                full.extend(path.into_iter().filter(|s| s != "self"));
                out.push(full);
            }
            from = end.max(from);
        }
    }
    out
}

/// The paths of a use tree (`a::{b, c::{d, e}}` gives `a::b`, `a::c::d`, `a::c::e`).
fn expand(tree: &str) -> Vec<Vec<String>> {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        let segs: Vec<String> = tree
            .split("::")
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect();
        return vec![segs];
    };
    let prefix: Vec<String> = tree[..open]
        .split("::")
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
    let mut items = Vec::new();
    let (mut depth, mut item) = (0, String::new());
    for ch in inner.chars() {
        match ch {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(std::mem::take(&mut item));
                continue;
            }
            _ => {}
        }
        item.push(ch);
    }
    items.push(item);
    let mut out = Vec::new();
    for it in items.iter().filter(|i| !i.trim().is_empty()) {
        // `x as y` names x.
        let it = it.split(" as ").next().unwrap_or(it);
        for sub in expand(it) {
            let mut p = prefix.clone();
            p.extend(sub);
            out.push(p);
        }
    }
    out
}

struct Library {
    /// Module path (crate root relative) of every library file and its room.
    rooms: BTreeMap<Vec<String>, String>,
    /// Room -> rooms it names.
    deps: BTreeMap<String, BTreeSet<String>>,
}

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("readable src/") {
        let p = e.expect("src/ entry").path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// A library file's module path (`src/gpu/mod.rs` is `gpu`) and room.
fn module_and_room(rel: &Path) -> (Vec<String>, String) {
    let mut segs: Vec<String> = rel
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if segs.last().is_some_and(|s| s == "mod") {
        segs.pop();
    }
    let room = if segs.len() >= 2
        && segs[0] == "feature"
        && src_dir().join("feature").join(&segs[1]).is_dir()
    {
        format!("feature/{}", segs[1])
    } else {
        segs.join("/")
    };
    (segs, room)
}

fn library() -> Library {
    let src = src_dir();
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut sources = BTreeMap::new();
    let mut test_files = BTreeSet::new();
    for f in &files {
        let rel = f.strip_prefix(&src).unwrap().to_path_buf();
        if rel == Path::new("lib.rs") {
            continue;
        }
        let (code, test_mods) = without_tests(&code_only(&std::fs::read_to_string(f).unwrap()));
        // Where a `mod x;` of this file lives.
        let dir = if rel.file_name().is_some_and(|n| n == "mod.rs") {
            rel.parent().unwrap().to_path_buf()
        } else {
            rel.with_extension("")
        };
        for m in test_mods {
            test_files.insert(dir.join(format!("{m}.rs")));
            test_files.insert(dir.join(&m));
        }
        sources.insert(rel, code);
    }
    // lib.rs's own test modules (testutil).
    let (_, root_tests) = without_tests(&code_only(
        &std::fs::read_to_string(src.join("lib.rs")).unwrap(),
    ));
    for m in root_tests {
        test_files.insert(PathBuf::from(format!("{m}.rs")));
        test_files.insert(PathBuf::from(m));
    }
    sources.retain(|rel, _| !test_files.iter().any(|t| rel == t || rel.starts_with(t)));
    let mut rooms = BTreeMap::new();
    for rel in sources.keys() {
        let (module, room) = module_and_room(rel);
        rooms.insert(module, room);
    }
    let mut deps: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (rel, code) in &sources {
        let (module, room) = module_and_room(rel);
        let entry = deps.entry(room.clone()).or_default();
        for path in named_paths(code, &module) {
            // The room of the longest module prefix of the path.
            let to = (1..=path.len()).rev().find_map(|n| rooms.get(&path[..n]));
            if let Some(to) = to.filter(|t| **t != room) {
                entry.insert(to.clone());
            }
        }
    }
    Library { rooms, deps }
}

/// The strongly connected groups of more than one room (Tarjan's algorithm).
fn cycles(deps: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct T<'a> {
        deps: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        let i = t.index.len();
        t.index.insert(v, i);
        t.low.insert(v, i);
        t.stack.push(v);
        t.on.insert(v);
        for w in t.deps.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !t.index.contains_key(w) {
                visit(t, w);
                let lw = t.low[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if t.on.contains(w) {
                let iw = t.index[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if t.low[v] == t.index[v] {
            let mut group = Vec::new();
            while let Some(w) = t.stack.pop() {
                t.on.remove(w);
                group.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if group.len() > 1 {
                group.sort();
                t.out.push(group);
            }
        }
    }
    let mut t = T {
        deps,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in deps.keys() {
        if !t.index.contains_key(v.as_str()) {
            visit(&mut t, v);
        }
    }
    t.out
}

#[test]
fn rooms_import_each_other_without_cycles() {
    let lib = library();
    let rooms: BTreeSet<&String> = lib.rooms.values().collect();
    let edges: usize = lib.deps.values().map(BTreeSet::len).sum();
    println!("{} rooms, {edges} dependencies:", rooms.len());
    for (room, to) in &lib.deps {
        let to: Vec<&str> = to.iter().map(String::as_str).collect();
        println!("  {room} -> {}", to.join(", "));
    }
    let found = cycles(&lib.deps);
    println!("{} cycles", found.len());
    for group in &found {
        println!("  cycle among: {}", group.join(", "));
        for room in group {
            let inside: Vec<&str> = lib.deps[room]
                .iter()
                .filter(|t| group.contains(t))
                .map(String::as_str)
                .collect();
            println!("    {room} -> {}", inside.join(", "));
        }
    }
    // The rooms the check is about are there (it does not pass by finding nothing).
    for room in [
        "feature",
        "feature/vif",
        "gpu",
        "gpu/graph",
        "gpu/module",
        "picture",
    ] {
        assert!(rooms.contains(&room.to_string()), "no room {room}");
    }
    assert!(edges > 50, "only {edges} dependencies found");
    assert!(found.is_empty(), "{} import cycles", found.len());
}

/// The parser on the constructs it must see through.
#[test]
fn parser_finds_paths_and_skips_tests_and_text() {
    let src = r##"
        use crate::gpu::{self, job::Queued, launch::{Launch, Span}};
        use super::cpu::Thing;
        // crate::commented::Out
        /* crate::block::Out */
        let s = "crate::string::Out";
        let r = r#"crate::raw::Out"#;
        let c = '"'; let l: &'static str = "";
        fn f() { crate::inline::call(); }
        #[cfg(test)]
        mod tests { use crate::tested::Out; }
        #[cfg(test)]
        mod model;
    "##;
    let (code, test_mods) = without_tests(&code_only(src));
    assert_eq!(test_mods, ["model"]);
    let module = vec!["feature".to_string(), "vif".to_string(), "gpu".to_string()];
    let got: BTreeSet<String> = named_paths(&code, &module)
        .into_iter()
        .map(|p| p.join("::"))
        .collect();
    let want: BTreeSet<String> = [
        "gpu",
        "gpu::job::Queued",
        "gpu::launch::Launch",
        "gpu::launch::Span",
        "feature::vif::cpu::Thing",
        "inline::call",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(got, want);
    let mut deps = BTreeMap::new();
    deps.insert("a".to_string(), BTreeSet::from(["b".to_string()]));
    deps.insert("b".to_string(), BTreeSet::from(["c".to_string()]));
    deps.insert("c".to_string(), BTreeSet::from(["a".to_string()]));
    deps.insert("d".to_string(), BTreeSet::from(["a".to_string()]));
    assert_eq!(cycles(&deps), [["a", "b", "c"]]);
}
