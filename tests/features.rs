//! Cargo features, as a user meets them: `Builder::precise` exists without
//! its feature and `build` names the feature; the rustdoc of each
//! feature-gated item says which feature in its text (docs.rs's badge is
//! not in the source); and the feature-gated test targets are declared with
//! `required-features`, so that plain `cargo test` skips them instead of
//! running an empty target that reports `0 passed`.

use std::path::Path;

use wheel::Timer;

fn read(path: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[cfg(not(feature = "precise"))]
#[test]
fn without_the_feature_precise_builds_an_error_naming_the_feature() {
    // No runtime needed: the feature is checked first.
    let error = Timer::builder().precise().build().unwrap_err();
    assert!(error.is_precise_unsupported(), "{error}");
    let message = error.to_string();
    assert!(
        message.contains(r#"features = ["precise"]"#),
        "the message names the feature: {message}"
    );
}

#[cfg(feature = "precise")]
#[test]
fn with_the_feature_precise_errors_are_about_the_timer_not_the_feature() {
    let error = Timer::builder().manual().precise().build().unwrap_err();
    assert!(error.is_precise_unsupported(), "{error}");
    assert!(!error.to_string().contains("cargo feature"), "{error}");
}

/// The source files of the library, as (path, text).
fn sources() -> Vec<(String, String)> {
    fn walk(dir: &Path, out: &mut Vec<(String, String)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                out.push((path.display().to_string(), text));
            }
        }
    }
    let mut out = Vec::new();
    walk(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut out);
    out
}

/// The `///` lines just above line `at` (attributes in between skipped),
/// joined; or, for a module's inner `#![doc(cfg(..))]`, its `//!` lines.
fn doc_above(lines: &[&str], at: usize) -> String {
    let mut i = at;
    while i > 0 && lines[i - 1].trim_start().starts_with("#[") {
        i -= 1;
    }
    let marker = if lines[at].trim_start().starts_with("#![") {
        "//!"
    } else {
        "///"
    };
    let mut doc = Vec::new();
    while i > 0 && lines[i - 1].trim_start().starts_with(marker) {
        i -= 1;
        doc.push(lines[i].trim_start().trim_start_matches(marker).trim());
    }
    doc.reverse();
    doc.join(" ")
}

#[test]
fn feature_gated_items_name_their_feature_in_their_rustdoc() {
    let mut checked = 0;
    for (path, text) in sources() {
        let lines: Vec<&str> = text.lines().collect();
        for (n, line) in lines.iter().enumerate() {
            let Some((_, rest)) = line.split_once("doc(cfg(feature = \"") else {
                continue;
            };
            let feature = rest.split('"').next().unwrap();
            let doc = doc_above(&lines, n);
            assert!(
                doc.contains(&format!("feature `{feature}`")),
                "{path}:{}: a public item gated on `{feature}` whose rustdoc does not say \
                 \"feature `{feature}`\": {doc:?}",
                n + 1
            );
            checked += 1;
        }
        // A public item behind `#[cfg(feature)]` carries the docs.rs badge,
        // which the loop above checks.
        for (n, line) in lines.iter().enumerate() {
            if !line.trim_start().starts_with("#[cfg(feature") {
                continue;
            }
            let mut item = n + 1;
            while lines[item].trim_start().starts_with("#[") {
                item += 1;
            }
            let public = lines[item].trim_start().starts_with("pub fn")
                || lines[item].trim_start().starts_with("pub struct")
                || lines[item].trim_start().starts_with("impl ");
            let badge = lines[n..item].iter().any(|l| l.contains("doc(cfg(feature"));
            assert!(
                !public || badge,
                "{path}:{}: a public feature-gated item without doc(cfg)",
                n + 1
            );
        }
    }
    assert!(checked >= 2, "found the feature-gated items ({checked})");
}

/// Whether a test file gates itself on a feature with an inner
/// `cfg` attribute. (The needles are built so as not to match this file.)
fn gates_itself(text: &str) -> bool {
    let inner = ["#![cfg(", "feature"].concat();
    let inner_all = ["#![cfg(all(", "feature"].concat();
    text.contains(&inner) || text.contains(&inner_all)
}

/// `[[test]] name = "NAME"` is declared with `required-features`, and its
/// file does not also hide behind an inner `cfg` on the feature.
fn assert_declared(name: &str) {
    assert_declared_needing(name, &[name]);
}

/// [`assert_declared`], for a test target that needs `features`.
fn assert_declared_needing(name: &str, features: &[&str]) {
    let manifest = read("Cargo.toml");
    let features: Vec<String> = features.iter().map(|f| format!("\"{f}\"")).collect();
    let required = format!("required-features = [{}]", features.join(", "));
    let declared = manifest.split("[[test]]").skip(1).any(|target| {
        let target = target.split("\n[").next().unwrap();
        target.contains(&format!("name = \"{name}\"")) && target.contains(&required)
    });
    assert!(
        declared,
        "Cargo.toml declares no [[test]] {name} with {required}"
    );
    let file = read(&format!("tests/{name}.rs"));
    assert!(
        !gates_itself(&file),
        "tests/{name}.rs gates itself with an inner cfg: an empty target without the feature"
    );
}

#[test]
fn no_test_target_hides_behind_a_cfg_feature() {
    for entry in std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&path).unwrap();
            assert!(
                !gates_itself(&text),
                "{}: declare it in Cargo.toml with required-features instead",
                path.display()
            );
        }
    }
    assert_declared("hyper");
    assert_declared("precise");
    assert_declared_needing("server_test_clock", &["hyper", "tower"]);
}

// Plain `cargo test` lists these as ignored, with the reason: that is how
// it says which test targets it skipped. With the feature they run.
#[test]
#[cfg_attr(
    not(feature = "hyper"),
    ignore = "tests/hyper.rs skipped: it needs the `hyper` feature (cargo test --all-features)"
)]
fn hyper_tests_need_the_hyper_feature() {
    assert_declared("hyper");
}

#[test]
#[cfg_attr(
    not(feature = "precise"),
    ignore = "tests/precise.rs skipped: it needs the `precise` feature (cargo test --all-features)"
)]
fn precise_tests_need_the_precise_feature() {
    assert_declared("precise");
}

#[test]
#[cfg_attr(
    not(all(feature = "hyper", feature = "tower")),
    ignore = "tests/server_test_clock.rs skipped: it needs the `hyper` and `tower` features \
              (cargo test --all-features)"
)]
fn server_test_clock_tests_need_the_hyper_and_tower_features() {
    assert_declared_needing("server_test_clock", &["hyper", "tower"]);
}

/// The version of dependency `name` that `[dependencies]` asks for, as
/// (major, minor).
fn required_version(name: &str) -> (u64, u64) {
    let manifest = read("Cargo.toml");
    let dependencies = manifest
        .split("\n[dependencies]\n")
        .nth(1)
        .and_then(|rest| rest.split("\n[").next())
        .expect("Cargo.toml has a [dependencies] table");
    let line = dependencies
        .lines()
        .find(|line| line.starts_with(&format!("{name} = ")))
        .unwrap_or_else(|| panic!("no {name} in [dependencies]"));
    let version = line
        .split("version = \"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| panic!("{line}: no version"));
    let mut parts = version.split('.').map(|part| part.parse::<u64>().unwrap());
    (parts.next().unwrap(), parts.next().unwrap_or(0))
}

/// Found by review: `impl hyper::rt::Timer for Timer` defines `now`, a
/// trait method hyper added in 1.8.0 (and hyper takes its deadlines from
/// it only since then). The manifest asked for any hyper 1, so a project
/// whose lockfile held hyper 1.0 to 1.7 (cargo keeps a locked version that
/// matches) failed to build with the `hyper` feature: "method `now` is not
/// a member of trait `::hyper::rt::Timer`" (checked with hyper =1.7.0).
#[test]
fn the_hyper_dependency_asks_for_a_hyper_whose_timer_has_now() {
    let (major, minor) = required_version("hyper");
    assert!(
        major == 1 && minor >= 8,
        "Cargo.toml asks for hyper {major}.{minor}: Timer::now is in hyper 1.8 and later"
    );
}
