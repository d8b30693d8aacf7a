//! The README's quick start is `examples/quickstart/`, a crate of its own
//! that CI builds and runs with exactly the dependencies it lists: these
//! tests keep the two identical, so what a newcomer copies is what CI
//! proved. (Only the path to this repository differs: the README's points
//! to a clone beside the newcomer's project.)

use std::path::Path;

fn read(path: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The first fenced block of `language` (its info string starting so) in the
/// README's "Quick start" section, without its fences.
fn quick_start_block(language: &str) -> String {
    let readme = read("README.md");
    let section = readme
        .split("\n## ")
        .find(|section| section.starts_with("Quick start"))
        .expect("the README has a Quick start section");
    let mut lines = section.lines();
    lines
        .by_ref()
        .find(|line| line.starts_with(&format!("```{language}")))
        .unwrap_or_else(|| panic!("no ```{language} block in the quick start"));
    let block: Vec<&str> = lines.take_while(|line| *line != "```").collect();
    block.join("\n") + "\n"
}

/// `line` with the value of a `path = "..."` key replaced by `PATH`.
fn without_path(line: &str) -> String {
    match line.split_once("path = \"") {
        Some((before, rest)) => {
            let after = rest.split_once('"').expect("a closed string").1;
            format!("{before}path = \"PATH\"{after}")
        }
        None => line.to_owned(),
    }
}

#[test]
fn the_quick_start_code_is_the_quickstart_crate() {
    assert_eq!(
        quick_start_block("rust"),
        read("examples/quickstart/src/main.rs"),
        "the README's quick start and examples/quickstart/src/main.rs differ"
    );
}

#[test]
fn the_quick_start_dependencies_are_the_quickstart_crates() {
    let manifest = read("examples/quickstart/Cargo.toml");
    let dependencies: Vec<String> = manifest
        .split("[dependencies]\n")
        .nth(1)
        .expect("the quickstart crate has dependencies")
        .lines()
        .take_while(|line| !line.starts_with('['))
        .filter(|line| !line.trim().is_empty())
        .map(without_path)
        .collect();
    let readme: Vec<String> = quick_start_block("toml")
        .lines()
        .filter(|line| *line != "[dependencies]")
        .map(without_path)
        .collect();
    assert_eq!(readme, dependencies);
    assert!(
        dependencies[0].starts_with("tiered-wheel = { path = "),
        "{dependencies:?}"
    );
}
