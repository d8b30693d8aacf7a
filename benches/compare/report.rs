//! The table: one row per figure, printed as soon as it is known, as a
//! Markdown table so it can be pasted as is.

use crate::measure::{Group, PerColumn};
use crate::side::{print_header, Column, RATIO, RATIOS, VALUE};
use crate::support::median;

const WORKLOAD: usize = 40;
const GROUP: usize = 13;
const UNIT: usize = 12;
/// Prints the table's header.
pub(crate) fn header() {
    print_header([("workload", WORKLOAD), ("group", GROUP), ("unit", UNIT)]);
}

/// One row of the table.
#[derive(Debug)]
pub(crate) struct Row {
    pub(crate) workload: String,
    pub(crate) group: String,
    pub(crate) unit: &'static str,
    pub(crate) values: [Option<f64>; 4],
    /// Whether the ratios mean something for this row.
    pub(crate) ratio: bool,
}

impl Row {
    /// The medians of `metric` over each column's runs.
    pub(crate) fn median<R>(
        workload: impl Into<String>,
        group: Group,
        unit: &'static str,
        runs: &PerColumn<R>,
        metric: impl Fn(&R) -> f64,
    ) -> Row {
        Row::of(workload, group.label(), unit, runs, |values| {
            median(values.iter().map(&metric).collect())
        })
    }

    /// The sums of `metric` over each column's runs (counts, such as early
    /// completions, that must be zero in every run).
    pub(crate) fn sum<R>(
        workload: impl Into<String>,
        group: Group,
        unit: &'static str,
        runs: &PerColumn<R>,
        metric: impl Fn(&R) -> f64,
    ) -> Row {
        Row::of(workload, group.label(), unit, runs, |values| {
            values.iter().map(&metric).sum()
        })
        .without_ratio()
    }

    /// A row from each column's runs, `reduce`d; a column with no runs
    /// shows `-`.
    pub(crate) fn of<R>(
        workload: impl Into<String>,
        group: String,
        unit: &'static str,
        runs: &PerColumn<R>,
        reduce: impl Fn(&[R]) -> f64,
    ) -> Row {
        let values = Column::ALL.map(|c| {
            let of = runs.of(c);
            (!of.is_empty()).then(|| reduce(of))
        });
        Row {
            workload: workload.into(),
            group,
            unit,
            values,
            ratio: true,
        }
    }

    pub(crate) fn without_ratio(mut self) -> Row {
        self.ratio = false;
        self
    }

    pub(crate) fn print(&self) {
        print!(
            "| {:<WORKLOAD$} | {:<GROUP$} | {:<UNIT$} |",
            self.workload, self.group, self.unit
        );
        for v in self.values {
            print!(" {:>VALUE$} |", value(v));
        }
        for (_, top, bottom) in RATIOS {
            let ratio = match (
                self.ratio,
                self.values[top as usize],
                self.values[bottom as usize],
            ) {
                (true, Some(t), Some(b)) if b != 0.0 => format!("{:.2}", t / b),
                _ => "-".to_owned(),
            };
            print!(" {ratio:>RATIO$} |");
        }
        println!();
    }
}

/// Three significant digits or so, whatever the magnitude.
fn value(v: Option<f64>) -> String {
    match v {
        None => "-".to_owned(),
        Some(v) if v.is_nan() => "-".to_owned(),
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
