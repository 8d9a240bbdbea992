//! The structure the code must keep (README "How it is built"):
//!
//! - no import cycle between sibling modules of any crate of the workspace (a module that uses
//!   its parent's items is the usual Rust shape and not a cycle; two siblings that use each
//!   other, directly or through others, are);
//! - `fuser` is used by `src/fuse/` only;
//! - `hudifs-core` depends on neither `fuser`, `libc` nor `clap`;
//! - the `hudifs` package builds one program, `hudifs` (`cargo install --path .` installs only
//!   it).
//!
//! The cycle check also runs on a copy of the root crate with a cycle planted, and must fail.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` file below `src`, by module path (`fs/ops` for `src/fs/ops.rs`, `fs` for
/// `src/fs/mod.rs`; the crate root is `""`).
fn modules(src: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                if p.file_name().is_some_and(|n| n != "bin") {
                    stack.push(p);
                }
                continue;
            }
            if p.extension().is_none_or(|x| x != "rs") {
                continue;
            }
            let rel = p.strip_prefix(src).unwrap().with_extension("");
            let mut parts: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().to_string())
                .collect();
            if matches!(
                parts.last().map(String::as_str),
                Some("mod" | "lib" | "main")
            ) {
                parts.pop();
            }
            out.insert(parts.join("/"), std::fs::read_to_string(&p).unwrap());
        }
    }
    out
}

/// The module paths a file refers to through `crate::`, `super::` and `self::` paths
/// (including `use x::{a, b}` groups), resolved to the longest existing module.
fn references(module: &str, text: &str, all: &BTreeSet<String>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let own: Vec<&str> = module.split('/').filter(|s| !s.is_empty()).collect();
    let resolve = |start: &str, tail: &[&str]| -> Option<String> {
        let mut base: Vec<&str> = match start {
            "crate" => Vec::new(),
            "self" => own.clone(),
            // `super` of a file module is its parent's module.
            _ => own[..own.len().saturating_sub(1)].to_vec(),
        };
        let mut best = None;
        for seg in tail {
            base.push(seg);
            let candidate = base.join("/");
            if all.contains(&candidate) {
                best = Some(candidate);
            } else {
                break;
            }
        }
        best
    };
    let code: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let bytes = code.as_bytes();
    for start in ["crate", "super", "self"] {
        let pat = format!("{start}::");
        let mut from = 0;
        while let Some(at) = code[from..].find(&pat) {
            let i = from + at;
            from = i + pat.len();
            if i > 0 && (bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_') {
                continue;
            }
            let rest = &code[from..];
            if let Some(group) = rest.strip_prefix('{') {
                // `use crate::{a, b::c};`: each item of the group.
                let group = group.split('}').next().unwrap_or("");
                for item in group.split(',') {
                    let path: Vec<&str> = item
                        .trim()
                        .split("::")
                        .map(|s| s.split_whitespace().next().unwrap_or(""))
                        .take_while(|s| !s.is_empty() && !s.starts_with('{'))
                        .collect();
                    out.extend(resolve(start, &path));
                }
                continue;
            }
            let path: Vec<&str> = rest
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
                .next()
                .unwrap_or("")
                .split("::")
                .filter(|s| !s.is_empty())
                .collect();
            out.extend(resolve(start, &path));
        }
    }
    out.remove(module);
    out
}

/// Cycles between sibling modules: for each parent, the strongly connected components (of
/// more than one module) of the graph whose edge `a → b` means a module at or below sibling
/// `a` refers to one at or below sibling `b`.
fn sibling_cycles(src: &Path) -> Vec<Vec<String>> {
    let mods = modules(src);
    let all: BTreeSet<String> = mods.keys().cloned().collect();
    let mut edges: BTreeSet<(String, String)> = BTreeSet::new();
    for (m, text) in &mods {
        for r in references(m, text, &all) {
            // The sibling pair under the deepest common parent.
            let a: Vec<&str> = m.split('/').filter(|s| !s.is_empty()).collect();
            let b: Vec<&str> = r.split('/').filter(|s| !s.is_empty()).collect();
            let common = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
            if common < a.len() && common < b.len() {
                let parent = a[..common].join("/");
                let sa = format!("{parent}/{}", a[common]);
                let sb = format!("{parent}/{}", b[common]);
                edges.insert((sa, sb));
            }
        }
    }
    // Tarjan's strongly connected components.
    let nodes: BTreeSet<&String> = edges.iter().flat_map(|(a, b)| [a, b]).collect();
    let index_of: BTreeMap<&String, usize> =
        nodes.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let names: Vec<&String> = nodes.iter().copied().collect();
    let mut adj = vec![Vec::new(); names.len()];
    for (a, b) in &edges {
        adj[index_of[a]].push(index_of[b]);
    }
    struct T {
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        out: Vec<Vec<usize>>,
    }
    fn visit(v: usize, adj: &[Vec<usize>], t: &mut T) {
        t.index[v] = Some(t.next);
        t.low[v] = t.next;
        t.next += 1;
        t.stack.push(v);
        t.on[v] = true;
        for &w in &adj[v] {
            match t.index[w] {
                None => {
                    visit(w, adj, t);
                    t.low[v] = t.low[v].min(t.low[w]);
                }
                Some(i) if t.on[w] => t.low[v] = t.low[v].min(i),
                _ => {}
            }
        }
        if Some(t.low[v]) == t.index[v] {
            let mut scc = Vec::new();
            while let Some(w) = t.stack.pop() {
                t.on[w] = false;
                scc.push(w);
                if w == v {
                    break;
                }
            }
            t.out.push(scc);
        }
    }
    let n = names.len();
    let mut t = T {
        index: vec![None; n],
        low: vec![0; n],
        on: vec![false; n],
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in 0..n {
        if t.index[v].is_none() {
            visit(v, &adj, &mut t);
        }
    }
    let mut cycles: Vec<Vec<String>> = t
        .out
        .into_iter()
        .filter(|scc| scc.len() > 1)
        .map(|scc| {
            let mut c: Vec<String> = scc.iter().map(|i| names[*i].clone()).collect();
            c.sort();
            c
        })
        .collect();
    cycles.sort();
    cycles
}

fn crate_sources() -> Vec<PathBuf> {
    let root = workspace();
    let mut out = vec![root.join("src")];
    for e in std::fs::read_dir(root.join("crates")).unwrap().flatten() {
        let src = e.path().join("src");
        if src.is_dir() {
            out.push(src);
        }
    }
    out.sort();
    out
}

#[test]
fn no_module_imports_a_sibling_that_imports_it_back() {
    let mut problems = Vec::new();
    let mut checked = 0;
    for src in crate_sources() {
        checked += modules(&src).len();
        for c in sibling_cycles(&src) {
            problems.push(format!("{}: {}", src.display(), c.join(" ⇄ ")));
        }
    }
    assert!(checked > 40, "only {checked} modules found");
    assert!(
        problems.is_empty(),
        "module import cycles:\n{}",
        problems.join("\n")
    );
    eprintln!("{checked} modules checked, no import cycle");
}

#[test]
fn a_planted_cycle_is_caught() {
    let tmp = tempfile::tempdir().unwrap();
    let copy = tmp.path().join("src");
    let mut stack = vec![(workspace().join("src"), copy.clone())];
    while let Some((from, to)) = stack.pop() {
        std::fs::create_dir_all(&to).unwrap();
        for e in std::fs::read_dir(&from).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push((p.clone(), to.join(e.file_name())));
            } else {
                std::fs::copy(&p, to.join(e.file_name())).unwrap();
            }
        }
    }
    assert!(sibling_cycles(&copy).is_empty());
    // The file system reaching up into the daemon, which uses the file system.
    let fs = copy.join("fs/mod.rs");
    let mut text = std::fs::read_to_string(&fs).unwrap();
    text.push_str("\nfn _planted() -> std::path::PathBuf {\n    crate::daemon::log_path(std::path::Path::new(\"/x\"))\n}\n");
    std::fs::write(&fs, text).unwrap();
    let cycles = sibling_cycles(&copy);
    assert!(
        cycles
            .iter()
            .any(|c| c.contains(&"/daemon".to_string()) && c.contains(&"/fs".to_string())),
        "{cycles:?}"
    );
    // Sub-modules too: fs/partitions reaching into fs/view_cache, which uses fs/partitions.
    let partitions = copy.join("fs/partitions.rs");
    let mut text = std::fs::read_to_string(&partitions).unwrap();
    text.push_str("\nuse super::view_cache::ViewState as _Planted;\n");
    std::fs::write(&partitions, text).unwrap();
    let cycles = sibling_cycles(&copy);
    assert!(
        cycles
            .iter()
            .any(|c| c.contains(&"fs/partitions".to_string())
                && c.contains(&"fs/view_cache".to_string())),
        "{cycles:?}"
    );
}

#[test]
fn fuser_is_confined_to_the_adapter() {
    let mods = modules(&workspace().join("src"));
    let users: Vec<&String> = mods
        .iter()
        .filter(|(_, text)| {
            text.lines()
                .filter(|l| !l.trim_start().starts_with("//"))
                .any(|l| l.contains("fuser::") || l.contains("use fuser"))
        })
        .map(|(m, _)| m)
        .collect();
    assert!(
        !users.is_empty() && users.iter().all(|m| *m == "fuse" || m.starts_with("fuse/")),
        "modules that use fuser: {users:?}"
    );
}

#[test]
fn the_core_knows_no_fuse_libc_or_command_line() {
    let toml = std::fs::read_to_string(workspace().join("crates/hudifs-core/Cargo.toml")).unwrap();
    let deps = toml
        .split("[dependencies]")
        .nth(1)
        .unwrap()
        .split("\n[")
        .next()
        .unwrap();
    for forbidden in ["fuser", "libc", "clap"] {
        assert!(
            !deps
                .lines()
                .any(|l| l.trim_start().starts_with(&format!("{forbidden} "))
                    || l.trim_start().starts_with(&format!("{forbidden}="))),
            "hudifs-core depends on {forbidden}"
        );
    }
    for src in modules(&workspace().join("crates/hudifs-core/src")).values() {
        assert!(!src.contains("libc::") && !src.contains("fuser::"));
    }
}

#[test]
fn the_product_package_installs_one_program() {
    let toml = std::fs::read_to_string(workspace().join("Cargo.toml")).unwrap();
    assert!(
        !toml.contains("[[bin]]"),
        "the hudifs package declares extra programs"
    );
    assert!(
        !workspace().join("src/bin").exists(),
        "src/bin holds extra programs"
    );
    assert!(workspace().join("src/main.rs").is_file());
}

/// README's "How it is built" names the files and folders of each crate: every name it gives
/// exists, and every top-level module of every crate is named.
#[test]
fn the_readme_describes_the_tree_as_it_is() {
    let readme = std::fs::read_to_string(workspace().join("README.md")).unwrap();
    let section = readme
        .split("## How it is built")
        .nth(1)
        .and_then(|s| s.split("```").nth(1))
        .expect("README has a How it is built block");
    let mut crate_dir: Option<PathBuf> = None;
    let mut named: BTreeMap<PathBuf, BTreeSet<String>> = BTreeMap::new();
    let mut missing = Vec::new();
    for line in section.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if !line.starts_with(' ') && first.ends_with('/') {
            crate_dir = Some(workspace().join(first));
            continue;
        }
        let Some(dir) = &crate_dir else { continue };
        let src = if dir.ends_with("src") {
            dir.clone()
        } else {
            dir.join("src")
        };
        // The names in the left column (two spaces in; deeper lines continue a description):
        // `a.rs, b.rs` or `folder/`.
        let indent = line.len() - line.trim_start().len();
        if indent != 2 {
            continue;
        }
        let left = line.trim_start().split("  ").next().unwrap_or("");
        for name in left.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            if !(name.ends_with(".rs") || name.ends_with('/')) {
                continue;
            }
            if !src.join(name.trim_end_matches('/')).exists() {
                missing.push(format!("{}", src.join(name).display()));
            }
            named.entry(src.clone()).or_default().insert(
                name.trim_end_matches('/')
                    .trim_end_matches(".rs")
                    .to_string(),
            );
        }
    }
    assert!(
        missing.is_empty(),
        "README names what is not there: {missing:?}"
    );
    let mut unnamed = Vec::new();
    for src in crate_sources() {
        for e in std::fs::read_dir(&src).unwrap().flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            let module = name.trim_end_matches(".rs").to_string();
            if matches!(module.as_str(), "lib" | "main" | "bin") {
                continue;
            }
            let known = named.get(&src).is_some_and(|n| n.contains(&module));
            // The test kit is described as a whole.
            if !known && !src.starts_with(workspace().join("crates/hudifs-testkit")) {
                unnamed.push(format!("{}", src.join(&name).display()));
            }
        }
    }
    assert!(unnamed.is_empty(), "README does not name: {unnamed:?}");
}
