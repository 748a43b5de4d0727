//! Great-circle distances as Redis computes them (haversine on a sphere of Redis's earth
//! radius), and the longitude/latitude boxes that cover a circle, for the index's box query.

/// Redis's earth radius (`geohash_helper.c`), metres.
const EARTH_RADIUS_METERS: f64 = 6_372_797.560_856;

/// Metres per unit of GEORADIUS / FT.SEARCH geo filters.
pub fn unit_meters(unit: &str) -> Option<f64> {
    match unit.to_ascii_lowercase().as_str() {
        "m" => Some(1.0),
        "km" => Some(1000.0),
        "mi" => Some(1609.34),
        "ft" => Some(0.3048),
        _ => None,
    }
}

/// The great-circle distance between two points, metres.
pub fn distance_meters(lon1: f64, lat1: f64, lon2: f64, lat2: f64) -> f64 {
    let (lat1, lat2) = (lat1.to_radians(), lat2.to_radians());
    let half_dlat = (lat2 - lat1) / 2.0;
    let half_dlon = (lon2 - lon1).to_radians() / 2.0;
    let a = half_dlat.sin().powi(2) + lat1.cos() * lat2.cos() * half_dlon.sin().powi(2);
    2.0 * EARTH_RADIUS_METERS * a.sqrt().min(1.0).asin()
}

/// Boxes `(min_lon, min_lat, max_lon, max_lat)` whose union holds every point within `meters`
/// of the centre: one box, or two when the circle crosses the antimeridian. A little larger
/// than the circle; the caller checks each candidate's distance.
pub fn covering_boxes(lon: f64, lat: f64, meters: f64) -> Vec<(f64, f64, f64, f64)> {
    // 0.1% of slack for rounding: a box that is too small would lose matches.
    let angle_degrees = (meters / EARTH_RADIUS_METERS).to_degrees() * 1.001 + 1e-9;
    let min_lat = (lat - angle_degrees).max(-90.0);
    let max_lat = (lat + angle_degrees).min(90.0);
    let widest_lat = min_lat.abs().max(max_lat.abs());
    if widest_lat >= 89.999 || angle_degrees >= 90.0 {
        return vec![(-180.0, min_lat, 180.0, max_lat)];
    }
    let lon_degrees = angle_degrees / widest_lat.to_radians().cos();
    if lon_degrees >= 180.0 {
        return vec![(-180.0, min_lat, 180.0, max_lat)];
    }
    let (west, east) = (lon - lon_degrees, lon + lon_degrees);
    if west < -180.0 {
        vec![
            (-180.0, min_lat, east, max_lat),
            (west + 360.0, min_lat, 180.0, max_lat),
        ]
    } else if east > 180.0 {
        vec![
            (west, min_lat, 180.0, max_lat),
            (-180.0, min_lat, east - 360.0, max_lat),
        ]
    } else {
        vec![(west, min_lat, east, max_lat)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances_match_redis_geodist() {
        // GEODIST of Palermo (13.361389, 38.115556) and Catania (15.087269, 37.502669) in
        // Redis's documentation: 166274.1516 m. Redis measures between the points as its
        // 52-bit geohashes store them, a few centimetres off the given ones (0.1 m here); a
        // different radius or formula would be off by hundreds of metres.
        let meters = distance_meters(13.361_389, 38.115_556, 15.087_269, 37.502_669);
        assert!((meters - 166_274.151_6).abs() < 0.5, "{meters}");
        assert!(distance_meters(2.0, 48.0, 2.0, 48.0).abs() < 1e-9);
    }

    #[test]
    fn boxes_cover_every_point_of_the_circle() {
        for (lon, lat, meters) in [
            (2.35, 48.86, 10_000.0),
            (179.9, 10.0, 50_000.0),
            (-179.9, -10.0, 50_000.0),
            (0.0, 84.0, 300_000.0),
            (10.0, 0.0, 25_000_000.0),
        ] {
            let boxes = covering_boxes(lon, lat, meters);
            // Walk the circle's edge (just inside it) in every direction.
            for step in 0..360 {
                let bearing = f64::from(step).to_radians();
                let angle = meters * 0.9999 / EARTH_RADIUS_METERS;
                let (phi, lambda) = (lat.to_radians(), lon.to_radians());
                let edge_lat =
                    (phi.sin() * angle.cos() + phi.cos() * angle.sin() * bearing.cos()).asin();
                let edge_lon = lambda
                    + (bearing.sin() * angle.sin() * phi.cos())
                        .atan2(angle.cos() - phi.sin() * edge_lat.sin());
                let mut x = edge_lon.to_degrees();
                while x > 180.0 {
                    x -= 360.0;
                }
                while x < -180.0 {
                    x += 360.0;
                }
                let y = edge_lat.to_degrees();
                assert!(
                    boxes.iter().any(|(min_lon, min_lat, max_lon, max_lat)| {
                        (*min_lon..=*max_lon).contains(&x) && (*min_lat..=*max_lat).contains(&y)
                    }),
                    "({lon},{lat}) r={meters}: edge point ({x},{y}) outside {boxes:?}"
                );
            }
        }
    }
}
