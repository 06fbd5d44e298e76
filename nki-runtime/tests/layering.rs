//! The crate's dependency rule (see the crate documentation, "Layers"), checked on the source:
//! every `crate::` and `super::` path outside comments and test modules is an import of the
//! module it names, and imports point only down the layers (a parent module and its own
//! children excepted). That no files of the crate use each other in a circle, through
//! re-exports too, is checked for every crate of the workspace by its `tests/all/no_circles.rs`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The layers, bottom first: a module may import modules of lower layers, and its own folder.
const LAYERS: &[&[&str]] = &[
    &["cpu", "worker", "memory", "shape", "grid", "budget", "top8"],
    &["element"],
    &["bind"],
    &["device_tensor", "operand"],
    &["gather"],
    &[
        "indirect",
        "dyncopy",
        "local_gather",
        "range_select",
        "registers",
    ],
    &["engines"],
    &["exec"],
    &["host", "strict", "host_profile"],
    &["launch", "uninitialized"],
    &["instantiation", "schedule", "scratch"],
    &["core"],
    &["timing", "reference_launch"],
    &[""],
];

/// Observers see operands and the interpreter's hook, never the engines or the shortcuts.
const OBSERVERS: &[&str] = &["strict", "host_profile", "timing"];
const HIDDEN_FROM_OBSERVERS: &[&str] = &["engines", "host"];

/// Module path (`a::b`, `""` for the crate root) → the file's code.
fn modules(dir: &Path, prefix: &[String], out: &mut BTreeMap<String, String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_str().unwrap().to_string();
        if path.is_dir() {
            modules(&path, &[prefix, &[name]].concat(), out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let module = match name.as_str() {
                "mod" | "lib" => prefix.to_vec(),
                _ => [prefix, &[name]].concat(),
            };
            out.insert(
                module.join("::"),
                code(&std::fs::read_to_string(&path).unwrap()),
            );
        }
    }
}

/// The source without comments and without the test module at its end.
fn code(src: &str) -> String {
    let end = src.find("#[cfg(test)]\nmod tests").unwrap_or(src.len());
    let lines = src[..end]
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""));
    lines.collect::<Vec<_>>().join("\n")
}

/// The paths after each `anchor` (`crate::` or `super::`), groups `{a, b::c}` expanded.
fn paths(code: &str, anchor: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (at, _) in code.match_indices(anchor) {
        if code[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_') {
            continue;
        }
        expand(&code[at + anchor.len()..], String::new(), &mut found);
    }
    found
}

fn expand(rest: &str, prefix: String, found: &mut Vec<String>) {
    let word: String = rest
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
        .collect();
    let path = format!("{prefix}{word}");
    match rest[word.len()..].strip_prefix('{') {
        Some(group) => {
            let (mut depth, mut start) = (0, 0);
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => return expand(group[start..i].trim(), path, found),
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        expand(group[start..i].trim(), path.clone(), found);
                        start = i + 1;
                    }
                    _ => {}
                }
            }
        }
        None => found.push(path.trim_end_matches(':').to_string()),
    }
}

/// The longest known module that `path` starts with.
fn module_of(path: &str, known: &BTreeMap<String, String>) -> String {
    let segs: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
    (0..=segs.len())
        .rev()
        .map(|n| segs[..n].join("::"))
        .find(|m| known.contains_key(m))
        .unwrap_or_default()
}

fn top(module: &str) -> &str {
    module.split("::").next().unwrap_or("")
}

fn related(a: &str, b: &str) -> bool {
    let under = |x: &str, y: &str| y.is_empty() || x.starts_with(&format!("{y}::"));
    a == b || under(a, b) || under(b, a)
}

#[test]
fn imports_point_down_the_layers() {
    let mut known = BTreeMap::new();
    modules(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &[],
        &mut known,
    );
    let rank = |m: &str| LAYERS.iter().position(|l| l.contains(&top(m)));
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut wrong = Vec::new();
    for (module, code) in &known {
        let parent = module.rsplit_once("::").map_or("", |(p, _)| p);
        let crate_paths = paths(code, "crate::").into_iter();
        let super_paths = paths(code, "super::")
            .into_iter()
            .map(|p| format!("{parent}::{p}"));
        for dep in crate_paths
            .chain(super_paths)
            .map(|p| module_of(&p, &known))
        {
            if related(module, &dep) || (module.is_empty() && dep.is_empty()) {
                continue;
            }
            edges.entry(module.clone()).or_default().insert(dep.clone());
            let (from, to) = (top(module), top(&dep));
            match (rank(module), rank(&dep)) {
                (None, _) | (_, None) => {
                    wrong.push(format!("{module}: `{from}` or `{to}` is in no layer"))
                }
                (Some(a), Some(b)) if from != to && a <= b => {
                    wrong.push(format!("{module} imports {dep}, which is not below it"))
                }
                _ if OBSERVERS.contains(&from) && HIDDEN_FROM_OBSERVERS.contains(&to) => {
                    wrong.push(format!("observer {module} imports {dep}"))
                }
                _ => {}
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "the layering rule is broken:\n{}",
        wrong.join("\n")
    );
    assert!(edges.contains_key("exec") && edges["exec"].contains("engines::tensor"));
}
