//! Spatial queries on `geo` attributes: [`GeoBox`] and `Database::within`, for the `memory`
//! and `composite` kinds (`next` and `sst-local`: `next/query.rs`).
//!
//! Geo values are encoded Z-order code first (`encoding::zorder`), so the points inside a box
//! lie in a few ranges of encoded values. [`zorder_cover`] splits the box into at most
//! [`MAX_KEY_RANGES`] Z-order ranges by descending the quadtree of `encoding::zorder_cell`
//! while the budget allows; cells that touch the box's closed boundary are kept, so the cover
//! never misses a point. Each range is scanned (composite: the index tree; memory: its ordered
//! map), every candidate is filtered exactly against the box (edges inclusive), then
//! candidates are validated against the primary at the query snapshot newest entry first,
//! with the same top-K rules as LOOKUP/RANGE (`kind/query.rs`).

use crate::encoding::zorder_cell;
use crate::error::{IndexError, Result};
use std::fmt;

/// Most Z-order key ranges one `within` query scans.
pub const MAX_KEY_RANGES: usize = 16;

/// A longitude/latitude rectangle in degrees. Edges are inside: a point is in the box if
/// `min_lon <= lon <= max_lon` and `min_lat <= lat <= max_lat`. Boxes do not wrap around the
/// antimeridian (query two boxes for that).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GeoBox {
    /// West edge, degrees.
    pub min_lon: f64,
    /// South edge, degrees.
    pub min_lat: f64,
    /// East edge, degrees.
    pub max_lon: f64,
    /// North edge, degrees.
    pub max_lat: f64,
}

impl GeoBox {
    /// A box; every coordinate must be finite, longitudes in -180..=180, latitudes in
    /// -90..=90, and each minimum at most its maximum (equal is allowed: a line or a point).
    pub fn new(min_lon: f64, min_lat: f64, max_lon: f64, max_lat: f64) -> Result<GeoBox> {
        let geo_box = GeoBox {
            min_lon,
            min_lat,
            max_lon,
            max_lat,
        };
        let bad = |reason: String| IndexError::InvalidGeoBox {
            found: geo_box.to_string(),
            reason,
        };
        for (name, x) in [
            ("min_lon", min_lon),
            ("min_lat", min_lat),
            ("max_lon", max_lon),
            ("max_lat", max_lat),
        ] {
            if !x.is_finite() {
                return Err(bad(format!("{name} is {x}, not a finite number")));
            }
        }
        for (name, lon) in [("min_lon", min_lon), ("max_lon", max_lon)] {
            if !(-180.0..=180.0).contains(&lon) {
                return Err(bad(format!("{name} {lon} is outside -180..=180")));
            }
        }
        for (name, lat) in [("min_lat", min_lat), ("max_lat", max_lat)] {
            if !(-90.0..=90.0).contains(&lat) {
                return Err(bad(format!("{name} {lat} is outside -90..=90")));
            }
        }
        if min_lon > max_lon {
            return Err(bad(format!(
                "min_lon {min_lon} is greater than max_lon {max_lon}"
            )));
        }
        if min_lat > max_lat {
            return Err(bad(format!(
                "min_lat {min_lat} is greater than max_lat {max_lat}"
            )));
        }
        Ok(geo_box)
    }

    /// Parses `min_lon,min_lat,max_lon,max_lat` (spaces allowed around the numbers).
    pub fn parse(text: &str) -> Result<GeoBox> {
        let bad = |reason: String| IndexError::InvalidGeoBox {
            found: format!("{text:?}"),
            reason,
        };
        let numbers = text
            .split(',')
            .map(|part| {
                part.trim()
                    .parse::<f64>()
                    .map_err(|e| bad(format!("{:?} is not a number ({e})", part.trim())))
            })
            .collect::<Result<Vec<f64>>>()?;
        match numbers[..] {
            [min_lon, min_lat, max_lon, max_lat] => GeoBox::new(min_lon, min_lat, max_lon, max_lat),
            _ => Err(bad(format!("{} numbers instead of 4", numbers.len()))),
        }
    }

    /// Whether the point is in the box, edges included.
    pub fn contains(&self, lon: f64, lat: f64) -> bool {
        self.min_lon <= lon && lon <= self.max_lon && self.min_lat <= lat && lat <= self.max_lat
    }
}

impl fmt::Display for GeoBox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "[{}, {}, {}, {}]",
            self.min_lon, self.min_lat, self.max_lon, self.max_lat
        )
    }
}

/// How a quadtree cell relates to the box (conservatively: `Disjoint` only when no point of
/// the cell can be in the box, `Inside` only when every point is).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Relation {
    Disjoint,
    Partial,
    Inside,
}

fn relate(geo_box: &GeoBox, code: u64, prefix_bits: u32) -> Relation {
    let cell = zorder_cell(code, prefix_bits);
    // Cell edges: lower inclusive, upper exclusive (except 180/90); treating the upper edge as
    // inclusive only over-approximates the overlap.
    if geo_box.max_lon < cell.lon_min
        || geo_box.min_lon > cell.lon_max
        || geo_box.max_lat < cell.lat_min
        || geo_box.min_lat > cell.lat_max
    {
        return Relation::Disjoint;
    }
    if geo_box.min_lon <= cell.lon_min
        && cell.lon_max <= geo_box.max_lon
        && geo_box.min_lat <= cell.lat_min
        && cell.lat_max <= geo_box.max_lat
    {
        return Relation::Inside;
    }
    Relation::Partial
}

/// The inclusive Z-order range of the codes sharing `code`'s top `prefix_bits` bits.
fn prefix_range(code: u64, prefix_bits: u32) -> (u64, u64) {
    let free_bits = 64 - prefix_bits.min(64);
    let free_mask = if free_bits == 64 {
        u64::MAX
    } else {
        (1u64 << free_bits) - 1
    };
    (code & !free_mask, code | free_mask)
}

/// Sorts and joins overlapping or adjacent inclusive ranges.
fn merge_ranges(mut ranges: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    ranges.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::with_capacity(ranges.len());
    for (low, high) in ranges {
        match merged.last_mut() {
            Some((_, last_high)) if last_high.checked_add(1).is_none_or(|next| low <= next) => {
                *last_high = (*last_high).max(high);
            }
            _ => merged.push((low, high)),
        }
    }
    merged
}

/// At most `max_ranges` (at least 1) sorted, disjoint, inclusive Z-order ranges whose union
/// holds the code of every point inside `geo_box` (and usually some outside: filter exactly).
pub fn zorder_cover(geo_box: &GeoBox, max_ranges: usize) -> Vec<(u64, u64)> {
    let max_ranges = max_ranges.max(1);
    let mut inside: Vec<(u64, u64)> = Vec::new();
    let mut partial: Vec<u64> = vec![0];
    let mut prefix_bits = 0u32;
    while prefix_bits < 64 && !partial.is_empty() {
        let child_bits = prefix_bits + 2;
        let mut next_inside = Vec::new();
        let mut next_partial = Vec::new();
        for &code in &partial {
            for quadrant in 0..4u64 {
                let child = code | (quadrant << (64 - child_bits));
                match relate(geo_box, child, child_bits) {
                    Relation::Disjoint => {}
                    Relation::Inside => next_inside.push(prefix_range(child, child_bits)),
                    Relation::Partial => next_partial.push(child),
                }
            }
        }
        let candidate: Vec<(u64, u64)> = inside
            .iter()
            .copied()
            .chain(next_inside.iter().copied())
            .chain(
                next_partial
                    .iter()
                    .map(|&code| prefix_range(code, child_bits)),
            )
            .collect();
        if merge_ranges(candidate).len() > max_ranges {
            break;
        }
        inside.extend(next_inside);
        partial = next_partial;
        prefix_bits = child_bits;
    }
    merge_ranges(
        inside
            .into_iter()
            .chain(partial.iter().map(|&code| prefix_range(code, prefix_bits)))
            .collect(),
    )
}

/// Encoded-value bounds `[start, end)` of an inclusive Z-order range (geo encodings start with
/// the code, big-endian).
pub(crate) fn key_bounds((low, high): (u64, u64)) -> (Vec<u8>, Option<Vec<u8>>) {
    (
        low.to_be_bytes().to_vec(),
        high.checked_add(1).map(|next| next.to_be_bytes().to_vec()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encoding::zorder;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    #[test]
    fn box_validation_errors_name_the_problem() {
        let message = |result: Result<GeoBox>| match result {
            Err(error) => error.to_string(),
            Ok(geo_box) => format!("accepted {geo_box}"),
        };
        assert!(message(GeoBox::new(f64::NAN, 0.0, 1.0, 1.0)).contains("min_lon is NaN"));
        assert!(message(GeoBox::new(0.0, 0.0, f64::INFINITY, 1.0)).contains("not a finite"));
        assert!(message(GeoBox::new(-181.0, 0.0, 1.0, 1.0)).contains("outside -180..=180"));
        assert!(message(GeoBox::new(0.0, 0.0, 1.0, 90.5)).contains("max_lat 90.5"));
        assert!(message(GeoBox::new(2.0, 0.0, 1.0, 1.0)).contains("greater than max_lon"));
        assert!(message(GeoBox::new(0.0, 2.0, 1.0, 1.0)).contains("greater than max_lat"));
        assert!(GeoBox::new(1.0, 1.0, 1.0, 1.0).is_ok(), "a point is a box");
        assert!(GeoBox::new(-180.0, -90.0, 180.0, 90.0).is_ok());
        assert_eq!(
            GeoBox::parse(" -74.5, 40,-73 ,41 ").ok(),
            GeoBox::new(-74.5, 40.0, -73.0, 41.0).ok()
        );
        assert!(message(GeoBox::parse("1,2,3")).contains("3 numbers instead of 4"));
        assert!(message(GeoBox::parse("1,2,x,4")).contains("\"x\" is not a number"));
        assert!(message(GeoBox::parse("1,2,3,nan")).contains("not a finite"));
    }

    #[test]
    fn edges_are_inside() {
        let geo_box = GeoBox::new(-10.0, -5.0, 10.0, 5.0).unwrap_or_else(|_| unreachable!());
        for (lon, lat) in [(-10.0, 0.0), (10.0, 5.0), (0.0, -5.0), (-10.0, -5.0)] {
            assert!(geo_box.contains(lon, lat), "[{lon}, {lat}]");
        }
        assert!(!geo_box.contains(10.000_001, 0.0));
    }

    /// The cover holds the code of every point inside the box, including points on its edges
    /// and at the poles and antimeridian, and stays within the range budget.
    #[test]
    fn cover_contains_every_inside_point() {
        let seed: u64 = std::env::var("SIFT_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(rand::random);
        let mut rng = StdRng::seed_from_u64(seed);
        let grid = |rng: &mut StdRng, limit: f64| -> f64 {
            match rng.gen_range(0..4) {
                0 => limit * if rng.gen_bool(0.5) { 1.0 } else { -1.0 },
                1 => f64::from(rng.gen_range(-8..=8)) * limit / 8.0,
                _ => rng.gen_range(-limit..=limit),
            }
        };
        for round in 0..300 {
            let (a, b) = (grid(&mut rng, 180.0), grid(&mut rng, 180.0));
            let (c, d) = (grid(&mut rng, 90.0), grid(&mut rng, 90.0));
            let geo_box = GeoBox::new(a.min(b), c.min(d), a.max(b), c.max(d))
                .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
            let budget = rng.gen_range(1..=MAX_KEY_RANGES);
            let cover = zorder_cover(&geo_box, budget);
            assert!(
                !cover.is_empty() && cover.len() <= budget,
                "seed {seed} round {round}: {} ranges for budget {budget}",
                cover.len()
            );
            let mut points = vec![
                (geo_box.min_lon, geo_box.min_lat),
                (geo_box.max_lon, geo_box.max_lat),
                (geo_box.min_lon, geo_box.max_lat),
                (geo_box.max_lon, geo_box.min_lat),
            ];
            for _ in 0..50 {
                points.push((
                    rng.gen_range(geo_box.min_lon..=geo_box.max_lon),
                    rng.gen_range(geo_box.min_lat..=geo_box.max_lat),
                ));
            }
            for (lon, lat) in points {
                let code = zorder(lon, lat);
                assert!(
                    cover.iter().any(|&(low, high)| low <= code && code <= high),
                    "seed {seed} round {round}: [{lon}, {lat}] of {geo_box} not covered by {cover:?}"
                );
            }
        }
    }

    #[test]
    fn small_boxes_get_tight_covers() {
        let geo_box = GeoBox::new(-74.1, 40.6, -73.8, 40.9).unwrap_or_else(|_| unreachable!());
        let cover = zorder_cover(&geo_box, MAX_KEY_RANGES);
        let covered: u128 = cover
            .iter()
            .map(|&(low, high)| u128::from(high - low) + 1)
            .sum();
        // The box is about 1e-6 of the world; the cover should be well under 1e-3 of it.
        assert!(
            covered < (1u128 << 64) / 1000,
            "cover spans {covered} codes"
        );
    }
}
