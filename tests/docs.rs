//! What a reader of the docs meets: every rustdoc page opens with a
//! one-line summary; no example section is a "See ..." stub; references to
//! a document's section name a section that exists; `Timer`'s and
//! `TimerHandle`'s `Debug` are readable; the README names the library.

use std::path::Path;

use wheel::Timer;

fn read(path: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The library's sources, as (path, text), but for the bare wheel
/// (`src/wheel/`, hidden) and the loom models.
fn sources() -> Vec<(String, String)> {
    fn walk(dir: &Path, out: &mut Vec<(String, String)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.display().to_string();
            if path.is_dir() {
                if !name.ends_with("/wheel") && !name.ends_with("/tests") {
                    walk(&path, out);
                }
            } else if name.ends_with(".rs") && !name.ends_with("loom.rs") {
                out.push((name, std::fs::read_to_string(&path).unwrap()));
            }
        }
    }
    let mut out = Vec::new();
    walk(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut out);
    out
}

/// `text` as rustdoc shows it, near enough: link targets dropped.
fn rendered(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("](") {
        out.push_str(&rest[..=at]);
        rest = &rest[at + 2..];
        rest = rest.split_once(')').map_or("", |(_, after)| after);
    }
    out + rest
}

fn is_item(line: &str) -> bool {
    let line = line.trim_start();
    [
        "pub fn ",
        "pub struct ",
        "pub enum ",
        "pub trait ",
        "pub mod ",
        "pub use ",
        "pub const ",
        "pub type ",
    ]
    .iter()
    .any(|start| line.starts_with(start))
        || (line.starts_with("impl") && line.contains(" for "))
}

/// A summary rustdoc shows on one line of an item list: the first
/// paragraph of every public item's docs, at most this long.
const SUMMARY: usize = 150;

#[test]
fn every_rustdoc_page_opens_with_a_one_line_summary() {
    let mut long = Vec::new();
    let mut items = 0;
    for (path, text) in sources() {
        let lines: Vec<&str> = text.lines().collect();
        let mut n = 0;
        while n < lines.len() {
            if !lines[n].trim_start().starts_with("///") {
                n += 1;
                continue;
            }
            let start = n;
            while n < lines.len() && lines[n].trim_start().starts_with("///") {
                n += 1;
            }
            let mut item = n;
            while item < lines.len() && lines[item].trim_start().starts_with("#[") {
                item += 1;
            }
            if item == lines.len() || !is_item(lines[item]) {
                continue;
            }
            items += 1;
            let summary: Vec<&str> = lines[start..n]
                .iter()
                .map(|l| l.trim_start().trim_start_matches("///").trim())
                .take_while(|l| !l.is_empty())
                .collect();
            let summary = rendered(&summary.join(" "));
            if summary.len() > SUMMARY {
                long.push(format!("{path}:{}: {summary}", start + 1));
            }
        }
    }
    assert!(items > 100, "found the public items ({items})");
    assert!(
        long.is_empty(),
        "first paragraphs longer than {SUMMARY} characters (put the summary \
         first, the details after a blank line):\n{}",
        long.join("\n")
    );
}

#[test]
fn every_public_modules_page_opens_with_a_one_line_summary() {
    for path in ["src/lib.rs", "src/error.rs", "src/delay_queue/mod.rs"] {
        let text = read(path);
        let summary: Vec<&str> = text
            .lines()
            .take_while(|l| l.starts_with("//!"))
            .map(|l| l.trim_start_matches("//!").trim())
            .take_while(|l| !l.is_empty())
            .collect();
        let summary = rendered(&summary.join(" "));
        assert!(!summary.is_empty(), "{path} has no module docs");
        assert!(summary.len() <= SUMMARY, "{path}: {summary}");
    }
}

#[test]
fn no_example_section_is_a_see_stub() {
    for (path, text) in sources() {
        let lines: Vec<&str> = text.lines().map(str::trim).collect();
        for (n, window) in lines.windows(3).enumerate() {
            assert!(
                !(window[0] == "/// # Examples" && window[2].starts_with("/// See ")),
                "{path}:{}: an Examples section that only says {:?}",
                n + 1,
                window[2]
            );
        }
    }
}

/// The headings of a Markdown file, without their `#`s.
fn headings(markdown: &str) -> Vec<String> {
    markdown
        .lines()
        .filter(|l| l.starts_with('#'))
        .map(|l| l.trim_start_matches('#').trim().to_owned())
        .collect()
}

#[test]
fn references_to_a_documents_section_name_one_that_exists() {
    let readme = headings(&read("README.md"));
    let design = headings(&read("docs/DESIGN.md"));
    let mut found = 0;
    for (path, text) in sources() {
        let text = text.replace("\n    /// ", " ").replace("\n/// ", " ");
        for (marker, document, heads) in [
            ("README's \"", "README.md", &readme),
            ("\" in `docs/DESIGN.md`", "docs/DESIGN.md", &design),
        ] {
            for (at, _) in text.match_indices(marker) {
                let section = if marker.starts_with('"') {
                    text[..at].rsplit('"').next().unwrap()
                } else {
                    text[at + marker.len()..].split('"').next().unwrap()
                };
                assert!(
                    heads.iter().any(|h| h == section),
                    "{path}: points to {document}'s {section:?}, which has no such section"
                );
                found += 1;
            }
        }
    }
    assert!(found >= 1, "found the references ({found})");
}

#[test]
fn a_timers_debug_shows_its_shards() {
    let timer = Timer::builder().manual().build().unwrap();
    let debug = format!("{timer:?}");
    assert!(debug.contains("shards: 1"), "{debug}");
}

#[test]
fn a_timer_handles_debug_shows_its_deadline_as_a_duration_from_now() {
    let timer = Timer::builder().manual().build().unwrap();
    let handle = timer.schedule(std::time::Duration::from_secs(3), || {});
    let debug = format!("{handle:?}");
    assert!(debug.contains("due_in: 3s"), "{debug}");
    assert!(!debug.contains("tv_sec"), "{debug}");
    timer.advance(std::time::Duration::from_secs(5));
    let debug = format!("{handle:?}");
    assert!(debug.contains("overdue_by: 2s"), "{debug}");
    assert!(debug.contains("expired: true"), "{debug}");
}

#[test]
fn the_readme_names_the_library_and_stays_short() {
    let readme = read("README.md");
    let install = readme
        .split("\n## ")
        .find(|section| section.starts_with("Install"))
        .expect("the README has an Install section");
    assert!(
        install.contains("use wheel::"),
        "the install section says the library is `wheel`: {install}"
    );
    let chars = readme.chars().count();
    assert!(chars < 15_000, "the README is {chars} characters");
}
