//! No circle of files in any crate of the workspace. In each crate, each module file's `use`
//! trees and inline `crate::…` / `super::…` paths are resolved, through `pub use` re-exports, to
//! the file that defines what they name; no files may then use each other in a circle, except a
//! parent `mod.rs` with modules of its own folder (nki-lang's `ir/mod.rs` with `ir/operands.rs`
//! and `ir/ops/`, nki-runtime's `cpu/matmul/mod.rs` with its arch-specific children). Comments
//! and in-file tests are not read; a crate root's re-exports are its public face, not uses.
//! (nki-runtime's stricter rule, imports only down its layers, is its own `tests/layering.rs`.)
//! Method calls are not followed: a file calling a method that another file defines on a type
//! of a third (as `ProgramBuf::finish` in `verify/`) is seen to use the type's file only.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// A module's path from the crate root (`[]`: `lib.rs`).
type Mod = Vec<String>;

/// Every module file under `dir` (module `at`): its module, its name and its code.
fn read_files(dir: &Path, at: &[String], out: &mut Vec<(Mod, String, String)>) {
    for path in std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()) {
        let stem = path.file_stem().unwrap().to_string_lossy().to_string();
        let m = [at, std::slice::from_ref(&stem)].concat();
        if path.is_dir() {
            read_files(&path, &m, out);
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let code = text.split("#[cfg(test)]\nmod tests").next().unwrap_or("");
        let code: Vec<&str> = code
            .lines()
            .map(|l| l.split("//").next().unwrap())
            .collect();
        let own = usize::from(stem == "lib" || stem == "mod");
        let name = path.to_string_lossy().to_string();
        let name = name[name.rfind("/src/").unwrap() + 1..].to_string();
        out.push((m[..m.len() - own].to_vec(), name, code.join("\n")));
    }
}

/// `path`, written in module `m`, from the crate root (another crate's: from `m`).
fn absolute(m: &Mod, path: &str) -> Mod {
    let from_root = path.starts_with("crate::");
    let mut out = if from_root { Mod::new() } else { m.clone() };
    for s in path.split("::") {
        match s.trim() {
            "crate" | "self" => {}
            "super" => _ = out.pop(),
            s => out.push(s.to_string()),
        }
    }
    out
}

/// A module's paths (from the crate root, as written, and whether re-exported): its `use`
/// trees (`a::{b, c::{d as e}}`: `a::b`, `a::c::d`), then inline `crate::…` and `super::…`.
fn paths(m: &Mod, code: &str) -> Vec<(Mod, String, bool)> {
    let (mut out, mut rest, mut pos) = (Vec::new(), code.to_string(), 0);
    while let Some(at) = rest[pos..].find("use ").map(|off| pos + off) {
        let line = rest[..at].rfind('\n').map_or(0, |i| i + 1);
        let head = rest[line..at].trim().to_string();
        pos = at + 4;
        if !matches!(&*head, "" | "pub" | "pub(crate)" | "pub(super)") {
            continue;
        }
        let (mut prefixes, mut cur) = (vec![String::new()], String::new());
        for c in rest[pos..].chars().take_while(|&c| c != ';').chain([',']) {
            let prefix = prefixes.last().unwrap().clone();
            match c {
                '{' => prefixes.push(prefix + cur.trim()),
                ',' | '}' => {
                    if !cur.trim().is_empty() {
                        let p = prefix + cur.split(" as ").next().unwrap().trim();
                        out.push((absolute(m, &p), p, !head.is_empty()));
                    }
                    if c == '}' {
                        prefixes.pop();
                    }
                }
                _ => {
                    cur.push(c);
                    continue;
                }
            }
            cur.clear();
        }
        let end = at + rest[at..].find(';').unwrap();
        rest.replace_range(at..=end, "");
        pos = at;
    }
    let ident = |c: char| c.is_alphanumeric() || c == '_' || c == ':';
    for (at, _) in rest
        .match_indices("crate::")
        .chain(rest.match_indices("super::"))
    {
        let len = rest[at..].find(|c| !ident(c)).unwrap_or(rest.len() - at);
        let p = rest[at..at + len].trim_end_matches(':');
        if !rest[..at].ends_with(ident) {
            out.push((absolute(m, p), p.to_string(), false));
        }
    }
    out
}

/// The file that defines what `path` (from the crate root) names, through re-exports `re`.
fn resolve(path: &[String], index: &BTreeMap<Mod, usize>, re: &BTreeMap<Mod, Mod>) -> usize {
    let mut m = Mod::new();
    for (i, seg) in path.iter().enumerate() {
        let next = [&m[..], std::slice::from_ref(seg)].concat();
        match re.get(&next) {
            _ if index.contains_key(&next) => m = next,
            // A re-export of another crate under its own name (`pub use nki_lang;`) names
            // no file of this one.
            Some(to) if *to != next => {
                return resolve(&[&to[..], &path[i + 1..]].concat(), index, re);
            }
            Some(_) => break,
            None => break,
        }
    }
    index[&m]
}

/// The circles of files in the crate whose sources are in `src` (relative to the workspace),
/// after checking that at least `expected` uses between files were found.
fn circles_in(src: &str, expected: usize) -> String {
    let mut files = Vec::new();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(src);
    read_files(&src, &[], &mut files);
    let index: BTreeMap<Mod, usize> = (0..files.len()).map(|i| (files[i].0.clone(), i)).collect();
    let uses: Vec<_> = files.iter().map(|(m, _, code)| paths(m, code)).collect();
    let all = (0..)
        .zip(&uses)
        .flat_map(|(i, u)| u.iter().map(move |u| (i, u)));
    let mut re = BTreeMap::new();
    for (i, (abs, p, _)) in all.clone().filter(|(_, u)| u.2) {
        let name = p.rsplit("::").next().unwrap().to_string();
        re.insert([&files[i].0[..], &[name]].concat(), abs.clone());
    }
    // For each file, the files it uses, each with the first path that uses it.
    let mut edges = vec![BTreeMap::new(); files.len()];
    for (i, (abs, p, public)) in all {
        let to = resolve(abs, &index, &re);
        if to != i && !(*public && files[i].0.is_empty()) {
            edges[i].entry(to).or_insert_with(|| p.clone());
        }
    }
    let found: usize = edges.iter().map(BTreeMap::len).sum();
    assert!(
        found >= expected,
        "only {found} uses found between the files of {}: the parsing broke",
        src.display()
    );
    let reach = |from: usize| {
        let (mut seen, mut todo) = (BTreeSet::new(), vec![from]);
        while let Some(f) = todo.pop() {
            todo.extend(edges[f].keys().filter(|&&t| seen.insert(t)));
        }
        seen
    };
    let mut circles = String::new();
    for f in 0..files.len() {
        // The files in a circle with `f`, reported from the first of them.
        let mut circle = reach(f);
        circle.retain(|&g| reach(g).contains(&f));
        let parent = |&p: &usize| {
            let family = circle.iter().all(|&c| files[c].0.starts_with(&files[p].0));
            family && files[p].1.ends_with("mod.rs")
        };
        if circle.len() < 2 || circle.first() != Some(&f) || circle.iter().any(parent) {
            continue;
        }
        for &a in &circle {
            for (b, path) in edges[a].iter().filter(|(b, _)| circle.contains(b)) {
                circles += &format!("  {} -> {} ({path})\n", files[a].1, files[*b].1);
            }
        }
        circles += "\n";
    }
    circles
}

/// Fails with every circle of files in `src`.
fn assert_no_circle(src: &str, expected: usize) {
    let circles = circles_in(src, expected);
    let what = "files that use each other in a circle (file -> file it uses (path))";
    assert!(circles.is_empty(), "{src}: {what}:\n{circles}");
}

#[test]
fn no_circle_of_files_in_nki_lang() {
    assert_no_circle("nki-lang/src", 30);
}

#[test]
fn no_circle_of_files_in_nki_macros() {
    assert_no_circle("nki-macros/src", 10);
}

#[test]
fn no_circle_of_files_in_nki_runtime() {
    assert_no_circle("nki-runtime/src", 60);
}
