//! Helpers shared by the `compare` and `wheel` benches: the size argument, a
//! deterministic random generator, medians, and the machine header.
//!
//! Included with `#[path]` by each bench (cargo does not build this folder
//! as a target of its own), so everything here is used by both.

/// How big a run is: `1.0` is the size the issue specifies, `quick` is
/// [`QUICK`]. Read from the arguments (`quick`, `full`, `--scale X`), else
/// from `WHEEL_BENCH_SIZE` (`quick`, `full` or a number), else full.
#[derive(Debug, Clone, Copy)]
pub struct Size {
    /// Multiplies every iteration count (never the workload's shape, e.g. the
    /// pending counts of `scaling`).
    pub scale: f64,
    /// How the size was asked for, for the header.
    pub name: &'static str,
}

/// The scale `quick` stands for: a quarter, well under a minute on 2 cores
/// while keeping each timed loop long enough (tens of ms) to be stable.
pub const QUICK: f64 = 0.25;

impl Size {
    /// Parses a size word (`quick`, `full` or a positive number).
    pub fn parse(word: &str) -> Option<Size> {
        match word {
            "quick" => Some(Size {
                scale: QUICK,
                name: "quick",
            }),
            "full" => Some(Size {
                scale: 1.0,
                name: "full",
            }),
            other => other
                .parse::<f64>()
                .ok()
                .filter(|s| s.is_finite() && *s > 0.0)
                .map(|scale| Size {
                    scale,
                    name: "custom",
                }),
        }
    }

    /// The size from `WHEEL_BENCH_SIZE`, or full.
    pub fn from_env() -> Size {
        match std::env::var("WHEEL_BENCH_SIZE") {
            Ok(word) => Size::parse(&word).unwrap_or_else(|| {
                eprintln!("WHEEL_BENCH_SIZE={word:?} is not quick, full or a positive number");
                std::process::exit(2)
            }),
            Err(_) => Size::parse("full").expect("full is a size"),
        }
    }

    /// `full` scaled, at least `floor`.
    pub fn of(&self, full: usize, floor: usize) -> usize {
        ((full as f64 * self.scale).round() as usize).max(floor)
    }
}

/// splitmix64: a tiny deterministic generator, so both sides of a comparison
/// get exactly the same durations.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..=hi` (the modulo bias is irrelevant here).
    pub fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo + 1)
    }
}

/// The median (the mean of the middle two for an even count); NaN if empty.
pub fn median(mut values: Vec<f64>) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len() % 2 == 1 {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    }
}

/// "N cores, <CPU model>", from std and /proc/cpuinfo.
pub fn machine() -> String {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, m)| m.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".to_owned());
    format!("{cores} cores (nproc), {model}")
}
