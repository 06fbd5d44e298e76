//! The timing model against the published measurements of `docs/sources/calibration.md`:
//! each case's modeled / published ratio in its band, the published engine utilisations
//! within 10 points, the versions of one kernel ordered as the hardware orders them, the
//! profile's memory within capacity, and `docs/timing.md`'s fidelity table as the model gives
//! it now (regenerate it with `cargo run --release --example calibration -- --markdown`).

#![allow(dead_code)]

use crate::examples::calibration;

use std::sync::OnceLock;

use calibration::Outcome;

/// Every case, timed once for all the tests.
fn outcomes() -> &'static [Outcome] {
    static OUTCOMES: OnceLock<Vec<Outcome>> = OnceLock::new();
    OUTCOMES.get_or_init(|| calibration::run().expect("every case launches"))
}

fn case(id: &str) -> &'static Outcome {
    outcomes()
        .iter()
        .find(|o| o.case.id == id)
        .unwrap_or_else(|| panic!("no case {id}"))
}

/// The band each case's ratio stays in: every case is calibrated to ±10 %.
const BANDS: [(&str, f64, f64); 5] = [
    ("mm-tiled-trn1", 0.9, 1.1),
    ("mm-fully-optimized-trn1", 0.9, 1.1),
    ("kopt-v2-tiled-trn2", 0.9, 1.1),
    ("mamba-v1-small", 0.9, 1.1),
    ("mamba-v2", 0.9, 1.1),
];

#[test]
fn every_case_is_within_its_band() {
    assert_eq!(outcomes().len(), BANDS.len());
    for (id, lo, hi) in BANDS {
        let r = case(id).ratio();
        assert!(
            (lo..=hi).contains(&r),
            "{id}: modeled / published = {r:.3}, band [{lo}, {hi}]"
        );
    }
}

#[test]
fn published_utilisations_are_within_ten_points() {
    for o in outcomes() {
        for u in &o.case.utilisation {
            let modeled = o.modeled(u);
            assert!(
                (modeled - u.published).abs() <= 0.10,
                "{}: {} published {:.1} %, modeled {:.1} %",
                o.case.id,
                u.row,
                100.0 * u.published,
                100.0 * modeled
            );
        }
    }
}

#[test]
fn versions_are_ordered_as_on_the_hardware() {
    for (slow, fast) in calibration::PAIRS {
        let (a, b) = (case(slow), case(fast));
        assert!(a.case.published_us > b.case.published_us);
        assert!(
            a.profile.latency_us > b.profile.latency_us,
            "{slow} modeled {} µs, {fast} {} µs",
            a.profile.latency_us,
            b.profile.latency_us
        );
    }
}

#[test]
fn the_device_schedule_fits_on_chip_and_beats_the_program_as_allocated() {
    for o in outcomes() {
        let p = &o.profile;
        assert!(
            p.peak_sbuf_bytes <= p.sbuf_capacity,
            "{}: peak SBUF {} of {}",
            o.case.id,
            p.peak_sbuf_bytes,
            p.sbuf_capacity
        );
        assert!(p.peak_psum_banks <= p.psum_banks, "{}", o.case.id);
        // The program as allocated and ordered, still available, waits on its own addresses.
        assert!(o.program_order_us > p.execution_us, "{}", o.case.id);
    }
}

#[test]
fn the_error_summary_is_computed_over_every_case() {
    let (geomean, median, w15, w30) = calibration::summary(outcomes());
    let logs: Vec<f64> = outcomes().iter().map(|o| o.ratio().ln()).collect();
    let mean = logs.iter().sum::<f64>() / logs.len() as f64;
    assert!((geomean - mean.exp()).abs() < 1e-12);
    assert!(median >= 0.0 && median <= logs.iter().fold(0.0f64, |m, l| m.max(l.abs())));
    assert!((0.0..=1.0).contains(&w15) && w15 <= w30);
}

#[test]
fn docs_carry_the_fidelity_table() {
    let doc = include_str!("../../docs/timing.md");
    let table = calibration::markdown(outcomes());
    assert!(
        doc.contains(&table),
        "docs/timing.md's fidelity table is stale; replace it with the output of \
         `cargo run --release --example calibration -- --markdown`:\n{table}"
    );
    let held = calibration::markdown_held_out().expect("every check launches");
    assert!(
        doc.contains(&held),
        "docs/timing.md's held-out table is stale; replace it with the second table of \
         `cargo run --release --example calibration -- --markdown`:\n{held}"
    );
}
