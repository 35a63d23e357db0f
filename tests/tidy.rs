//! Tidy checks that keep the architecture invariants true (run by `cargo test`).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out.sort();
    out
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Lines of code outside comments, for pattern checks.
fn code_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim_start().starts_with("//"))
        .map(|(i, l)| (i + 1, l))
}

#[test]
fn the_core_does_no_io_and_knows_no_frameworks() {
    let forbidden = [
        "tokio",
        "rocket",
        "rdkafka",
        "serde",
        "std::fs",
        "std::net",
        "std::io",
        "SystemTime",
        "Instant",
        "rand::",
        "thread_rng",
        "std::env",
        "metrics::",
        "println!",
        "eprintln!",
    ];
    let files = rust_files(&root().join("crates/tidegate-core/src"));
    assert!(files.len() >= 5, "the core moved?");
    for file in files {
        let text = fs::read_to_string(&file).unwrap();
        for (n, line) in code_lines(&text) {
            for word in forbidden {
                assert!(
                    !line.contains(word),
                    "{}:{n} uses `{word}` in the pure core: {line}",
                    file.display()
                );
            }
        }
    }
}

/// Every Rust file of the server crate and of the layer crates.
fn all_source_files() -> Vec<PathBuf> {
    let mut files = rust_files(&root().join("src"));
    files.extend(rust_files(&root().join("crates")));
    files
}

/// What `cargo tree` says a workspace crate depends on (normal dependencies, all platforms).
fn dependency_names(package: &str, features: &[&str]) -> Vec<String> {
    let mut cmd = std::process::Command::new(env!("CARGO"));
    cmd.args(["tree", "--offline", "-e", "normal", "--prefix", "none", "-p", package]);
    if !features.is_empty() {
        cmd.args(["--features", &features.join(",")]);
    }
    let out = cmd.current_dir(root()).output().expect("cargo tree runs");
    assert!(
        out.status.success(),
        "cargo tree -p {package}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .collect()
}

#[test]
fn the_layer_crates_are_kept_apart_by_their_dependency_trees() {
    // A service that embeds the Router compiles neither a web framework nor librdkafka nor an
    // async runtime; the core compiles nothing that does I/O.
    let client = dependency_names("tidegate-client", &[]);
    assert!(client.contains(&"tidegate-core".to_owned()), "{client:?}");
    for framework in ["rocket", "rdkafka", "rdkafka-sys", "tokio", "hyper"] {
        assert!(!client.contains(&framework.to_owned()), "tidegate-client depends on {framework}");
    }
    // The `kafka` feature (the lane producer and consumer) brings librdkafka and tokio, and
    // still no web framework.
    let kafka = dependency_names("tidegate-client", &["kafka"]);
    for needed in ["rdkafka", "rdkafka-sys", "tokio"] {
        assert!(
            kafka.contains(&needed.to_owned()),
            "tidegate-client --features kafka lacks {needed}: {kafka:?}"
        );
    }
    for framework in ["rocket", "hyper"] {
        assert!(
            !kafka.contains(&framework.to_owned()),
            "tidegate-client --features kafka depends on {framework}"
        );
    }
    let core = dependency_names("tidegate-core", &[]);
    let allowed = [
        "tidegate-core",
        "thiserror",
        "thiserror-impl",
        "xxhash-rust",
        "proc-macro2",
        "quote",
        "syn",
        "unicode-ident",
    ];
    for dep in &core {
        assert!(
            allowed.contains(&dep.as_str()),
            "tidegate-core depends on {dep}: the core stays pure"
        );
    }
}

#[test]
fn only_the_http_module_knows_rocket() {
    for file in all_source_files() {
        let rel = file.strip_prefix(root()).unwrap().to_string_lossy().into_owned();
        if rel.starts_with("src/http/") {
            continue;
        }
        let text = fs::read_to_string(&file).unwrap();
        for (n, line) in code_lines(&text) {
            assert!(!line.contains("rocket::"), "{rel}:{n} names Rocket outside src/http: {line}");
        }
    }
}

/// Where rdkafka may be named: the server's Kafka module, and the client crate's `kafka`
/// feature (the lane producer and consumer services embed).
const KAFKA_MODULES: [&str; 2] = ["src/mq/", "crates/tidegate-client/src/kafka"];

#[test]
fn only_the_mq_modules_know_rdkafka() {
    for file in all_source_files() {
        let rel = file.strip_prefix(root()).unwrap().to_string_lossy().into_owned();
        if KAFKA_MODULES.iter().any(|m| rel.starts_with(m)) {
            continue;
        }
        let text = fs::read_to_string(&file).unwrap();
        for (n, line) in code_lines(&text) {
            assert!(
                !line.contains("rdkafka"),
                "{rel}:{n} names rdkafka outside {KAFKA_MODULES:?}: {line}"
            );
        }
    }
    assert!(root().join("src/mq/mod.rs").exists(), "the mq module moved?");
    assert!(
        root().join("crates/tidegate-client/src/kafka/mod.rs").exists(),
        "the client's kafka module moved?"
    );
}

#[test]
fn every_module_says_what_it_is_for() {
    for file in all_source_files().into_iter().chain(rust_files(&root().join("tests"))) {
        let text = fs::read_to_string(&file).unwrap();
        assert!(
            text.starts_with("//!"),
            "{} must open with a `//!` line saying what it is for",
            file.display()
        );
    }
}

#[test]
fn no_test_is_ignored_and_no_code_is_unsafe() {
    let ignore_attr = ["#[", "ignore]"].concat();
    let unsafe_block = ["unsafe", " {"].concat();
    for file in all_source_files().into_iter().chain(rust_files(&root().join("tests"))) {
        let text = fs::read_to_string(&file).unwrap();
        assert!(!text.contains(&ignore_attr), "{} ignores a test", file.display());
        assert!(!text.contains(&unsafe_block), "{} has unsafe code", file.display());
    }
    let lib = fs::read_to_string(root().join("src/lib.rs")).unwrap();
    assert!(lib.contains("#![forbid(unsafe_code)]"));
}

#[test]
fn every_metric_recorded_is_described() {
    let described: Vec<&str> =
        tidegate::telemetry::METRICS.iter().map(|(_, name, _)| *name).collect();
    for file in all_source_files() {
        let text = fs::read_to_string(&file).unwrap();
        let mut rest = text.as_str();
        while let Some(at) = rest.find("\"tidegate_") {
            let tail = &rest[at + 1..];
            let end = tail.find('"').unwrap();
            let name = &tail[..end];
            assert!(
                described.contains(&name),
                "{} records `{name}`, which telemetry::METRICS does not list",
                file.display()
            );
            rest = &tail[end..];
        }
    }
    for (kind, name, help) in tidegate::telemetry::METRICS {
        assert!(help.len() > 10, "{name} needs a real help text");
        match *kind {
            "counter" => assert!(name.ends_with("_total"), "counter {name} must end in _total"),
            "histogram" => {
                assert!(name.ends_with("_seconds"), "histogram {name} must be in seconds")
            }
            _ => assert!(!name.ends_with("_total"), "gauge {name} must not end in _total"),
        }
    }
}

/// The layers of `src/lib.rs`, lowest first. A module may name its own layer and those before
/// it, never one after it: core -> client -> (telemetry, duration, config) -> store -> service ->
/// edges.
/// `core` and `client` are crates of their own (`crates/`), so the compiler already keeps them
/// from looking up; here they are the layers the server's modules may use.
const LAYERS: &[(&str, &[&str])] = &[
    ("core", &["core"]),
    ("client", &["client"]),
    ("base", &["telemetry", "logging", "duration", "config"]),
    ("store", &["store"]),
    ("service", &["service"]),
    ("edge", &["http", "http_fast", "mq", "cli", "edge", "fence", "server", "demo"]),
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|(_, mods)| mods.contains(&module))
}

#[test]
fn layers_only_look_down() {
    for file in rust_files(&root().join("src")) {
        let rel = file.strip_prefix(root().join("src")).unwrap().to_string_lossy().into_owned();
        let top = rel.split(['/', '.']).next().unwrap();
        let Some(own) = layer_of(top) else { continue };
        let text = fs::read_to_string(&file).unwrap();
        for (n, line) in code_lines(&text) {
            let mut rest = line;
            while let Some(at) = rest.find("crate::") {
                let tail = &rest[at + "crate::".len()..];
                let name: String =
                    tail.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                if let Some(theirs) = layer_of(&name) {
                    // Edges are one layer, but only the CLI and the wiring itself start the
                    // wiring (`serve`, `demo`).
                    let wiring = ["server", "demo"].contains(&name.as_str())
                        && !["cli", "server", "demo"].contains(&top);
                    assert!(
                        theirs <= own && !wiring,
                        "src/{rel}:{n}: the {} layer (`{top}`) uses `{name}` from the {} layer above it: {line}",
                        LAYERS[own].0,
                        LAYERS[theirs].0
                    );
                }
                rest = tail;
            }
        }
    }
    assert!(root().join("src/service/mod.rs").exists(), "the service layer moved?");
}

// Import circles between the files of one crate.
//
// A file imports another when it names a path into it: `use crate::a::b::C`, `use super::x`,
// `use child::Y`, or `crate::a::f()`, `super::g()`, `child::h()` in code. A path lands on the
// deepest module it walks through that is a file (`a/b.rs` or `a/b/mod.rs`), so a name that
// `mod.rs` or `lib.rs` re-exports is an import of that `mod.rs` or `lib.rs`. `mod x;` is
// structure, not an import. `#[cfg(test)]` items are left out: a test module's imports are not
// the design. Tarjan's strongly connected components of that graph are its circles.

/// The circles that were there when the check came, one line per circle, its files sorted.
const IMPORT_CIRCLES: &str = "tests/import_circles.txt";

/// Comments and literals dropped, the rest as identifiers, `::` and single punctuation
/// characters, each with its line.
fn rust_tokens(text: &str) -> Vec<(String, usize)> {
    fn skip_string(chars: &[char], mut i: usize, hashes: usize, line: &mut usize) -> usize {
        while i < chars.len() {
            match chars[i] {
                '\\' if hashes == 0 => {
                    if chars.get(i + 1) == Some(&'\n') {
                        *line += 1;
                    }
                    i += 2;
                    continue;
                }
                '"' if (1..=hashes).all(|h| chars.get(i + h) == Some(&'#')) => {
                    return i + 1 + hashes;
                }
                '\n' => *line += 1,
                _ => {}
            }
            i += 1;
        }
        i
    }
    let word_char = |c: char| c.is_alphanumeric() || c == '_';
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    while i < chars.len() {
        let (c, next) = (chars[i], chars.get(i + 1).copied());
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    line += usize::from(chars[i] == '\n');
                    i += 1;
                }
            }
        } else if c == '"' {
            i = skip_string(&chars, i + 1, 0, &mut line);
        } else if c == '\'' {
            if next == Some('\\') {
                // An escaped character literal: '\n', '\'', '\u{..}'.
                i += 3;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if chars.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                // A lifetime or a loop label.
                i += 1;
                while i < chars.len() && word_char(chars[i]) {
                    i += 1;
                }
            }
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && word_char(chars[i]) {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let raw = matches!(word.as_str(), "r" | "br" | "cr");
            if matches!(word.as_str(), "b" | "c") && chars.get(i) == Some(&'"') {
                i = skip_string(&chars, i + 1, 0, &mut line);
            } else if raw && matches!(chars.get(i), Some('"' | '#')) {
                let mut j = i;
                while chars.get(j) == Some(&'#') {
                    j += 1;
                }
                if chars.get(j) == Some(&'"') {
                    i = skip_string(&chars, j + 1, j - i, &mut line);
                } else {
                    // A raw identifier, r#type.
                    let start = j;
                    while j < chars.len() && word_char(chars[j]) {
                        j += 1;
                    }
                    out.push((chars[start..j].iter().collect(), line));
                    i = j;
                }
            } else {
                out.push((word, line));
            }
        } else if c.is_ascii_digit() {
            while i < chars.len() && word_char(chars[i]) {
                i += 1;
            }
        } else if c == ':' && next == Some(':') {
            out.push(("::".to_owned(), line));
            i += 2;
        } else {
            out.push((c.to_string(), line));
            i += 1;
        }
    }
    out
}

fn is_word(token: &str) -> bool {
    token.starts_with(|c: char| c.is_alphabetic() || c == '_')
}

/// The index of the bracket that closes the one at `open` (the last token if none does).
fn closing(tokens: &[(String, usize)], open: usize) -> usize {
    let mut depth = 0i32;
    for (i, (t, _)) in tokens.iter().enumerate().skip(open) {
        match t.as_str() {
            "(" | "[" | "{" => depth += 1,
            ")" | "]" | "}" => depth -= 1,
            _ => {}
        }
        if depth == 0 {
            return i;
        }
    }
    tokens.len().saturating_sub(1)
}

/// The paths of one `use` tree starting at `*at`, each with the segments of the groups around it.
fn use_paths(
    tokens: &[(String, usize)],
    at: &mut usize,
    prefix: &[String],
    out: &mut Vec<Vec<String>>,
) {
    let t = |i: usize| tokens.get(i).map_or("", |(s, _)| s.as_str());
    let mut segs = prefix.to_vec();
    loop {
        match t(*at) {
            // `use ::std::..`: a path that leaves the crate.
            "::" if segs.is_empty() => {
                segs.push("::".to_owned());
                *at += 1;
            }
            "::" => *at += 1,
            "{" => {
                *at += 1;
                while !matches!(t(*at), "}" | "" | ";") {
                    let before = *at;
                    use_paths(tokens, at, &segs, out);
                    if t(*at) == "," || *at == before {
                        *at += 1;
                    }
                }
                *at += 1;
                return;
            }
            "*" => {
                *at += 1;
                out.push(segs);
                return;
            }
            word if is_word(word) => {
                segs.push(word.to_owned());
                *at += 1;
                if t(*at) == "as" {
                    *at += 2;
                }
                if t(*at) != "::" {
                    out.push(segs);
                    return;
                }
            }
            _ => {
                out.push(segs);
                return;
            }
        }
    }
}

/// What one file declares and names, each under the inline modules around it.
#[derive(Default)]
struct FileScan {
    /// `mod name;` (false) and `mod name { .. }` (true).
    mods: Vec<(Vec<String>, String, bool)>,
    /// Every path of two or more segments, and every `use` path, with its line.
    paths: Vec<(Vec<String>, Vec<String>, usize)>,
}

fn scan_file(text: &str) -> FileScan {
    let tokens = rust_tokens(text);
    let t = |i: usize| tokens.get(i).map_or("", |(s, _)| s.as_str());
    let mut scan = FileScan::default();
    // One entry per open brace: the inline module it opens, if it opens one.
    let mut braces: Vec<Option<String>> = Vec::new();
    let mut cfg_test = false;
    let mut i = 0;
    while i < tokens.len() {
        let inline: Vec<String> = braces.iter().flatten().cloned().collect();
        let token = t(i);
        if token == "#" && (t(i + 1) == "[" || (t(i + 1) == "!" && t(i + 2) == "[")) {
            let open = if t(i + 1) == "[" { i + 1 } else { i + 2 };
            let end = closing(&tokens, open);
            let inside: Vec<&str> = (open + 1..end).map(t).collect();
            cfg_test |= inside == ["cfg", "(", "test", ")"];
            i = end + 1;
        } else if cfg_test {
            // Skip the item the attribute is on: to its `;`, or the end of its first block.
            let mut j = i;
            while j < tokens.len() && !matches!(t(j), ";" | "{") {
                j = if matches!(t(j), "(" | "[") { closing(&tokens, j) + 1 } else { j + 1 };
            }
            i = if t(j) == "{" { closing(&tokens, j) + 1 } else { j + 1 };
            cfg_test = false;
        } else if token == "mod" && is_word(t(i + 1)) {
            let name = t(i + 1).to_owned();
            if t(i + 2) == "{" {
                scan.mods.push((inline, name.clone(), true));
                braces.push(Some(name));
                i += 3;
            } else {
                scan.mods.push((inline, name, false));
                i += 2;
            }
        } else if token == "use" {
            let (line, mut at, mut found) = (tokens[i].1, i + 1, Vec::new());
            use_paths(&tokens, &mut at, &[], &mut found);
            scan.paths.extend(found.into_iter().map(|p| (inline.clone(), p, line)));
            i = at;
        } else if is_word(token) && t(i + 1) == "::" && !matches!(t(i.wrapping_sub(1)), "::" | "$")
        {
            let mut segs = vec![token.to_owned()];
            let mut j = i + 1;
            while t(j) == "::" && is_word(t(j + 1)) {
                segs.push(t(j + 1).to_owned());
                j += 2;
            }
            scan.paths.push((inline, segs, tokens[i].1));
            i = j;
        } else {
            match token {
                "{" => braces.push(None),
                "}" => {
                    braces.pop();
                }
                _ => {}
            }
            i += 1;
        }
    }
    scan
}

/// The module a path names from module `here`: the deepest module it walks through. `None` when
/// the path leaves the crate (std, other crates) or starts at an item rather than a module.
fn resolve(
    modules: &BTreeMap<Vec<String>, String>,
    here: &[String],
    segs: &[String],
) -> Option<Vec<String>> {
    let (mut at, mut rest) = (here.to_vec(), segs);
    match segs.first()?.as_str() {
        "crate" => (at, rest) = (Vec::new(), &segs[1..]),
        "self" => rest = &segs[1..],
        "super" => {
            while rest.first().is_some_and(|s| s == "super") {
                at.pop()?;
                rest = &rest[1..];
            }
        }
        first => {
            let child: Vec<String> = here.iter().cloned().chain([first.to_owned()]).collect();
            modules.get(&child)?;
        }
    }
    for seg in rest.iter().filter(|s| *s != "self") {
        let child: Vec<String> = at.iter().cloned().chain([seg.clone()]).collect();
        if !modules.contains_key(&child) {
            break;
        }
        at = child;
    }
    Some(at)
}

/// One crate's files (from its root file, following `mod` declarations) and which imports which:
/// `edges[a]` maps `b` to the first line and path by which file `a` names file `b`.
struct ImportGraph {
    files: Vec<String>,
    edges: Vec<BTreeMap<usize, (usize, String)>>,
}

fn import_graph(root_file: &str, read: &dyn Fn(&str) -> Option<String>) -> ImportGraph {
    // Module path -> the file it is in (inline modules are in their parent's file).
    let mut modules: BTreeMap<Vec<String>, String> = BTreeMap::new();
    modules.insert(Vec::new(), root_file.to_owned());
    let mut scanned: Vec<(String, Vec<String>, FileScan)> = Vec::new();
    let mut queue =
        vec![(Vec::new(), root_file.to_owned(), read(root_file).expect("the crate root"))];
    while let Some((module, file, text)) = queue.pop() {
        let scan = scan_file(&text);
        let (dir, stem) = file.rsplit_once('/').unwrap_or(("", &file));
        let children = if ["lib.rs", "main.rs", "mod.rs"].contains(&stem) {
            dir.to_owned()
        } else {
            format!("{dir}/{}", stem.trim_end_matches(".rs"))
        };
        for (inline, name, is_inline) in &scan.mods {
            let path: Vec<String> =
                module.iter().chain(inline).cloned().chain([name.clone()]).collect();
            if *is_inline {
                modules.insert(path, file.clone());
                continue;
            }
            let dir = [children.clone()]
                .into_iter()
                .chain(inline.iter().cloned())
                .collect::<Vec<_>>()
                .join("/");
            let found = [format!("{dir}/{name}.rs"), format!("{dir}/{name}/mod.rs")]
                .into_iter()
                .find_map(|f| read(&f).map(|text| (f, text)));
            let Some((child, text)) = found else {
                panic!(
                    "{file} declares `mod {name}`, but neither {dir}/{name}.rs nor {dir}/{name}/mod.rs exists"
                )
            };
            modules.insert(path.clone(), child.clone());
            queue.push((path, child, text));
        }
        scanned.push((file, module, scan));
    }
    let mut files: Vec<String> = scanned.iter().map(|(f, _, _)| f.clone()).collect();
    files.sort();
    let index = |f: &str| files.binary_search_by(|x| x.as_str().cmp(f)).unwrap();
    let mut edges = vec![BTreeMap::new(); files.len()];
    for (file, module, scan) in &scanned {
        let from = index(file);
        for (inline, segs, line) in &scan.paths {
            let here: Vec<String> = module.iter().chain(inline).cloned().collect();
            let Some(target) = resolve(&modules, &here, segs) else { continue };
            let to = index(&modules[&target]);
            if to != from {
                edges[from].entry(to).or_insert_with(|| (*line, segs.join("::")));
            }
        }
    }
    ImportGraph { files, edges }
}

/// Tarjan's strongly connected components with more than one node, each sorted, smallest first.
fn circles(edges: &[Vec<usize>]) -> Vec<Vec<usize>> {
    struct Tarjan<'a> {
        edges: &'a [Vec<usize>],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        out: Vec<Vec<usize>>,
    }
    impl Tarjan<'_> {
        fn visit(&mut self, v: usize) {
            self.index[v] = Some(self.next);
            self.low[v] = self.next;
            self.next += 1;
            self.stack.push(v);
            self.on_stack[v] = true;
            for &w in &self.edges[v] {
                match self.index[w] {
                    None => {
                        self.visit(w);
                        self.low[v] = self.low[v].min(self.low[w]);
                    }
                    Some(iw) if self.on_stack[w] => self.low[v] = self.low[v].min(iw),
                    Some(_) => {}
                }
            }
            if Some(self.low[v]) == self.index[v] {
                let mut component = Vec::new();
                loop {
                    let w = self.stack.pop().unwrap();
                    self.on_stack[w] = false;
                    component.push(w);
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.out.push(component);
                }
            }
        }
    }
    let n = edges.len();
    let mut t = Tarjan {
        edges,
        index: vec![None; n],
        low: vec![0; n],
        on_stack: vec![false; n],
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in 0..n {
        if t.index[v].is_none() {
            t.visit(v);
        }
    }
    t.out.sort();
    t.out
}

/// One shortest way round a circle from file `start`, each step with the line and path that
/// make it: `a.rs:3 (crate::b::X) -> b.rs:9 (super::a) -> a.rs`.
fn example_chain(graph: &ImportGraph, circle: &[usize], start: usize) -> String {
    let mut came_from: BTreeMap<usize, usize> = BTreeMap::new();
    let mut frontier = vec![start];
    'search: while !frontier.is_empty() {
        let mut next = Vec::new();
        for v in frontier {
            for &w in graph.edges[v].keys().filter(|w| circle.contains(w)) {
                if w == start {
                    came_from.insert(usize::MAX, v);
                    break 'search;
                }
                if let std::collections::btree_map::Entry::Vacant(e) = came_from.entry(w) {
                    e.insert(v);
                    next.push(w);
                }
            }
        }
        frontier = next;
    }
    let mut path = vec![came_from[&usize::MAX]];
    while *path.last().unwrap() != start {
        path.push(came_from[path.last().unwrap()]);
    }
    path.reverse();
    let mut out = String::new();
    for (k, &v) in path.iter().enumerate() {
        let w = *path.get(k + 1).unwrap_or(&start);
        let (line, via) = &graph.edges[v][&w];
        out += &format!("{}:{line} ({via}) -> ", graph.files[v]);
    }
    out + &graph.files[start]
}

/// What differs between the circles found and the known list: new and grown circles, and
/// known circles that shrank or went (the list must then say so). Empty when they agree.
fn circle_changes(known: &[Vec<String>], found: &[Vec<String>]) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (k, circle) in found.iter().enumerate() {
        if known.contains(circle) {
            continue;
        }
        let near: Vec<&Vec<String>> =
            known.iter().filter(|old| old.iter().any(|f| circle.contains(f))).collect();
        let outside: Vec<&String> =
            circle.iter().filter(|f| !near.iter().any(|old| old.contains(f))).collect();
        let text = if near.is_empty() {
            format!("a NEW import circle of {} files: {}", circle.len(), circle.join(" "))
        } else if outside.is_empty() && near.len() == 1 {
            format!(
                "a known circle SHRANK from {} to {} files (well done: now write it into {IMPORT_CIRCLES}): {}",
                near[0].len(),
                circle.len(),
                circle.join(" ")
            )
        } else {
            format!(
                "a known circle GREW to {} files ({} known circle(s) joined; files new to any circle: {}): {}",
                circle.len(),
                near.len(),
                outside.iter().map(|f| f.as_str()).collect::<Vec<_>>().join(" "),
                circle.join(" ")
            )
        };
        out.push((k, text));
    }
    for old in known {
        if !found.iter().any(|circle| old.iter().any(|f| circle.contains(f))) {
            out.push((
                usize::MAX,
                format!(
                    "a known circle of {} files is GONE (well done: delete its line from {IMPORT_CIRCLES}): {}",
                    old.len(),
                    old.join(" ")
                ),
            ));
        }
    }
    out
}

/// The crate roots of the workspace: the server's `src/lib.rs` and `src/main.rs`, and
/// `crates/*/src/lib.rs`.
fn crate_roots() -> Vec<String> {
    let mut roots = vec!["src/lib.rs".to_owned(), "src/main.rs".to_owned()];
    for entry in fs::read_dir(root().join("crates")).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if root().join("crates").join(&name).join("src/lib.rs").exists() {
            roots.push(format!("crates/{name}/src/lib.rs"));
        }
    }
    roots.sort();
    roots
}

#[test]
fn no_import_circle_comes_or_grows() {
    let read = |f: &str| fs::read_to_string(root().join(f)).ok();
    // Each circle's files, with its crate's graph and its nodes there.
    let mut found: Vec<(Vec<String>, usize, Vec<usize>)> = Vec::new();
    let mut graphs = Vec::new();
    for crate_root in crate_roots() {
        let graph = import_graph(&crate_root, &read);
        let adjacency: Vec<Vec<usize>> =
            graph.edges.iter().map(|e| e.keys().copied().collect()).collect();
        for circle in circles(&adjacency) {
            let files = circle.iter().map(|&v| graph.files[v].clone()).collect();
            found.push((files, graphs.len(), circle));
        }
        graphs.push(graph);
    }
    let reached: Vec<&String> = graphs.iter().flat_map(|g| &g.files).collect();
    // The check sees every file: one the `mod` walk missed would hide its imports.
    for dir in ["src"]
        .into_iter()
        .map(str::to_owned)
        .chain(crate_roots().iter().filter_map(|r| r.strip_suffix("/lib.rs").map(str::to_owned)))
    {
        for file in rust_files(&root().join(&dir)) {
            let rel = file.strip_prefix(root()).unwrap().to_string_lossy().replace('\\', "/");
            assert!(reached.contains(&&rel), "{rel}: no `mod` reaches it from its crate's root");
        }
    }
    found.sort();
    let known: Vec<Vec<String>> = fs::read_to_string(root().join(IMPORT_CIRCLES))
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| l.split_whitespace().map(str::to_owned).collect())
        .collect();
    let circles: Vec<Vec<String>> = found.iter().map(|(files, _, _)| files.clone()).collect();
    let changes = circle_changes(&known, &circles);
    let mut report = String::new();
    for (k, text) in &changes {
        report += &format!("- {text}\n");
        if let Some((files, g, circle)) = found.get(*k) {
            // Round a file new to the circles, if the circle has one.
            let new = files.iter().position(|f| !known.iter().flatten().any(|old| old == f));
            let chain = example_chain(&graphs[*g], circle, circle[new.unwrap_or(0)]);
            report += &format!("  for example: {chain}\n");
        }
    }
    let today: Vec<String> = circles.iter().map(|c| c.join(" ")).collect();
    assert!(
        changes.is_empty(),
        "import circles between the files of a crate (ARCHITECTURE.md: none comes new or grows):\n\
         {report}\nA new or grown circle: break it (move the shared type or function down into \
         the file both use, as `UnitMove` went into unit_map.rs). A shrunk or gone one: the lines \
         of {IMPORT_CIRCLES} must be the circles of today, which are:\n{}\n",
        today.join("\n")
    );
}

#[test]
fn tarjan_finds_the_circles_of_a_small_graph() {
    // 0 -> 1 -> 2 -> 0 and 2 -> 3 <-> 4; 5 -> 0 is on no circle, nor is 6 alone.
    let edges = vec![vec![1], vec![2], vec![0, 3], vec![4], vec![3], vec![0], vec![]];
    assert_eq!(circles(&edges), vec![vec![0, 1, 2], vec![3, 4]]);
    assert!(circles(&[vec![1], vec![2], vec![]]).is_empty());
}

#[test]
fn an_import_circle_is_found_in_source_text() {
    let files: BTreeMap<&str, &str> = BTreeMap::from([
        ("x/src/lib.rs", "//! x\nmod a;\nmod b;\npub mod c;\npub use c::Seven;\n"),
        // `crate::b` in a `use` group, `std` is not a module of the crate; the comment and the
        // string name `c` but do not import it.
        (
            "x/src/a.rs",
            "use crate::{b::Thing};\nuse std::fmt::{self, Write as _};\n// crate::c::Seven\nfn f() { let _ = \"crate::c::S\"; }\n",
        ),
        // `super::a` in code, through a grandchild module declared inline.
        (
            "x/src/b/mod.rs",
            "mod inner { pub fn g() { super::super::a::f() } }\npub struct Thing;\n",
        ),
        // A test module's imports are left out; `crate::Seven` is lib.rs's re-export.
        (
            "x/src/c.rs",
            "pub struct Seven;\n#[cfg(test)]\nmod tests { use crate::a::f; }\nfn h() -> crate::Seven { crate::Seven }\n",
        ),
    ]);
    let read = |f: &str| files.get(f).map(|t| t.to_string());
    let graph = import_graph("x/src/lib.rs", &read);
    assert_eq!(graph.files, ["x/src/a.rs", "x/src/b/mod.rs", "x/src/c.rs", "x/src/lib.rs"]);
    let adjacency: Vec<Vec<usize>> =
        graph.edges.iter().map(|e| e.keys().copied().collect()).collect();
    // a <-> b, and c <-> lib.rs (c names lib.rs's re-export, lib.rs re-exports c).
    assert_eq!(adjacency, [vec![1], vec![0], vec![3], vec![2]]);
    let found = circles(&adjacency);
    assert_eq!(found, [vec![0, 1], vec![2, 3]]);
    assert_eq!(
        example_chain(&graph, &found[0], 0),
        "x/src/a.rs:1 (crate::b::Thing) -> x/src/b/mod.rs:1 (super::super::a::f) -> x/src/a.rs"
    );
}

#[test]
fn the_circle_list_only_shrinks() {
    let list = |ls: &[&[&str]]| -> Vec<Vec<String>> {
        ls.iter().map(|c| c.iter().map(|f| f.to_string()).collect()).collect()
    };
    let known = list(&[&["a", "b", "c"], &["x", "y"]]);
    assert!(circle_changes(&known, &known).is_empty());
    let kinds = |found: &[&[&str]]| -> Vec<String> {
        circle_changes(&known, &list(found))
            .into_iter()
            .map(|(_, t)| {
                let upper = |w: &&str| w.len() > 2 && w.chars().all(|c| c.is_ascii_uppercase());
                t.split_whitespace().find(upper).unwrap().to_owned()
            })
            .collect()
    };
    assert_eq!(kinds(&[&["a", "b", "c"], &["x", "y"], &["p", "q"]]), ["NEW"]);
    assert_eq!(kinds(&[&["a", "b", "c", "d"], &["x", "y"]]), ["GREW"]);
    assert_eq!(kinds(&[&["a", "b", "c", "x", "y"]]), ["GREW"]);
    assert_eq!(kinds(&[&["a", "b"], &["x", "y"]]), ["SHRANK"]);
    assert_eq!(kinds(&[&["a", "b", "c"]]), ["GONE"]);
}

/// Every file path (relative to the repository) under `dir`, skipping build output and VCS data.
fn repo_files(dir: &Path, base: &Path, out: &mut Vec<String>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            if ![".git", "target", "node_modules", "book", ".cache"].contains(&name.as_str()) {
                repo_files(&path, base, out);
            }
        } else {
            out.push(path.strip_prefix(base).unwrap().to_string_lossy().into_owned());
        }
    }
}

/// ARCHITECTURE.md names files and folders in backticks (`src/http/`, `holds.rs`,
/// `scripts/postgres.sh`): each one must exist, so the code map cannot drift from the tree as
/// files are renamed, split or removed. A bare name may live anywhere; a name with a slash is a
/// path from the repository root or the end of one.
#[test]
fn every_file_the_architecture_names_exists() {
    let root = root();
    let text = fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let mut files = Vec::new();
    repo_files(&root, &root, &mut files);
    let exts = [".rs", ".sh", ".json", ".toml", ".md", ".py", ".js", ".html", ".yml", ".yaml"];
    let mut named = 0;
    let mut missing = Vec::new();
    for (i, part) in text.split('`').enumerate() {
        // Odd parts are inside backticks.
        if i % 2 == 0 || part.contains([' ', '*', '<', ':']) {
            continue;
        }
        let is_dir = part.ends_with('/') && part.len() > 1 && !part.starts_with('/');
        let is_file = exts.iter().any(|e| part.ends_with(e));
        if !is_dir && !is_file {
            continue;
        }
        named += 1;
        let found = if is_dir {
            files.iter().any(|f| f.starts_with(part) || f.contains(&format!("/{part}")))
        } else {
            files.iter().any(|f| f == part || f.ends_with(&format!("/{part}")))
        };
        if !found {
            missing.push(part.to_owned());
        }
    }
    missing.sort();
    missing.dedup();
    assert!(named >= 50, "found only {named} file names in ARCHITECTURE.md");
    assert!(missing.is_empty(), "ARCHITECTURE.md names files that do not exist: {missing:?}");
}
