//! The table: one row per figure, printed as soon as it is known, as a
//! Markdown table so it can be pasted as is.

use crate::measure::PerSide;
use crate::support::median;

const WORKLOAD: usize = 50;
const UNIT: usize = 15;
const VALUE: usize = 11;

/// Prints the table's header.
pub(crate) fn header() {
    println!(
        "| {:<WORKLOAD$} | {:<UNIT$} | {:>VALUE$} | {:>VALUE$} | {:>VALUE$} |",
        "workload", "unit", "tokio", "wheel", "wheel/tokio"
    );
    println!(
        "|{}|{}|{}:|{}:|{}:|",
        "-".repeat(WORKLOAD + 2),
        "-".repeat(UNIT + 2),
        "-".repeat(VALUE + 1),
        "-".repeat(VALUE + 1),
        "-".repeat(VALUE + 1),
    );
}

/// One row of the table.
#[derive(Debug)]
pub(crate) struct Row {
    pub(crate) workload: String,
    pub(crate) unit: &'static str,
    pub(crate) tokio: Option<f64>,
    pub(crate) wheel: Option<f64>,
    /// Whether `wheel / tokio` means something for this row.
    pub(crate) ratio: bool,
}

impl Row {
    /// The medians of `metric` over each side's runs.
    pub(crate) fn median<R>(
        workload: impl Into<String>,
        unit: &'static str,
        runs: &PerSide<R>,
        metric: impl Fn(&R) -> f64,
    ) -> Row {
        let of = |values: &[R]| {
            (!values.is_empty()).then(|| median(values.iter().map(&metric).collect()))
        };
        Row {
            workload: workload.into(),
            unit,
            tokio: of(&runs.tokio),
            wheel: of(&runs.wheel),
            ratio: true,
        }
    }

    /// The sums of `metric` over each side's runs (counts, such as early
    /// completions, that must be zero in every run).
    pub(crate) fn sum<R>(
        workload: impl Into<String>,
        unit: &'static str,
        runs: &PerSide<R>,
        metric: impl Fn(&R) -> f64,
    ) -> Row {
        let of = |values: &[R]| (!values.is_empty()).then(|| values.iter().map(&metric).sum());
        Row {
            workload: workload.into(),
            unit,
            tokio: of(&runs.tokio),
            wheel: of(&runs.wheel),
            ratio: false,
        }
    }

    pub(crate) fn without_ratio(mut self) -> Row {
        self.ratio = false;
        self
    }

    pub(crate) fn print(&self) {
        let ratio = match (self.ratio, self.tokio, self.wheel) {
            (true, Some(t), Some(w)) if t != 0.0 => format!("{:.2}", w / t),
            _ => "-".to_owned(),
        };
        println!(
            "| {:<WORKLOAD$} | {:<UNIT$} | {:>VALUE$} | {:>VALUE$} | {:>VALUE$} |",
            self.workload,
            self.unit,
            value(self.tokio),
            value(self.wheel),
            ratio
        );
    }
}

/// Three significant digits or so, whatever the magnitude.
fn value(v: Option<f64>) -> String {
    match v {
        None => "-".to_owned(),
        Some(v) if v == v.trunc() && v.abs() < 1e9 => format!("{v:.0}"),
        Some(v) if v.abs() >= 100.0 => format!("{v:.0}"),
        Some(v) if v.abs() >= 10.0 => format!("{v:.1}"),
        Some(v) if v.abs() >= 1.0 => format!("{v:.2}"),
        Some(v) => format!("{v:.3}"),
    }
}

/// `name`, with the size appended when it is not the nominal one, so a
/// scaled-down row never claims the full workload's name alone.
pub(crate) fn label(name: &str, n: usize, nominal: usize) -> String {
    if n == nominal {
        name.to_owned()
    } else {
        format!("{name} (n={n})")
    }
}
