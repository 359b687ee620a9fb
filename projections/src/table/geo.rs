//! Geo points as Elasticsearch reads them, distances with their units, and distances on the
//! globe. Ingestion (a `geo_point` column's values) and the Query DSL (`geo_distance`,
//! `geo_bounding_box`) read points the same way.

use serde_json::Value;

/// The mean radius of the Earth in metres, as Elasticsearch's arc distance takes it.
pub const EARTH_RADIUS_M: f64 = 6_371_008.771_4;

/// A point on the globe, in degrees.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Point {
    pub lat: f64,
    pub lon: f64,
}

impl Point {
    /// The point, if its latitude and longitude are in range.
    pub fn checked(lat: f64, lon: f64) -> Result<Point, String> {
        if !(-90.0..=90.0).contains(&lat) {
            return Err(format!("illegal latitude value [{lat}]"));
        }
        if !(-180.0..=180.0).contains(&lon) {
            return Err(format!("illegal longitude value [{lon}]"));
        }
        Ok(Point { lat, lon })
    }
}

fn number(value: &Value, what: &str) -> Result<f64, String> {
    match value {
        Value::Number(n) => n
            .as_f64()
            .ok_or_else(|| format!("[{what}] must be a number")),
        Value::String(s) => s
            .trim()
            .parse()
            .map_err(|_| format!("[{what}] must be a number, not [{s}]")),
        other => Err(format!("[{what}] must be a number, not {other}")),
    }
}

/// A point in any of the forms Elasticsearch takes: `{"lat": .., "lon": ..}`, `"lat,lon"`,
/// `[lon, lat]` (GeoJSON's order), `"POINT (lon lat)"` (WKT) and
/// `{"type": "Point", "coordinates": [lon, lat]}` (GeoJSON).
pub fn parse_point(value: &Value) -> Result<Point, String> {
    match value {
        Value::Object(object) if object.contains_key("coordinates") => {
            let kind = object.get("type").and_then(Value::as_str).unwrap_or("");
            if !kind.eq_ignore_ascii_case("point") {
                return Err(format!(
                    "a GeoJSON geo point has type [Point], not [{kind}]"
                ));
            }
            parse_point(&object["coordinates"])
        }
        Value::Object(object) => {
            let lat = object.get("lat").ok_or("field [lat] missing")?;
            let lon = object.get("lon").ok_or("field [lon] missing")?;
            if let Some(other) = object.keys().find(|k| *k != "lat" && *k != "lon") {
                return Err(format!("field [{other}] not supported in a geo point"));
            }
            Point::checked(number(lat, "lat")?, number(lon, "lon")?)
        }
        Value::Array(items) => match items.as_slice() {
            [lon, lat] | [lon, lat, _] => Point::checked(number(lat, "lat")?, number(lon, "lon")?),
            _ => Err("a geo point array is [lon, lat]".to_owned()),
        },
        Value::String(text) => {
            let trimmed = text.trim();
            if let Some(inner) = trimmed
                .strip_prefix("POINT")
                .or_else(|| trimmed.strip_prefix("point"))
            {
                let inner = inner
                    .trim()
                    .strip_prefix('(')
                    .and_then(|i| i.strip_suffix(')'))
                    .ok_or_else(|| format!("malformed WKT point [{text}]"))?;
                let mut parts = inner.split_whitespace();
                let (Some(lon), Some(lat)) = (parts.next(), parts.next()) else {
                    return Err(format!("malformed WKT point [{text}]"));
                };
                return Point::checked(
                    number(&Value::from(lat), "lat")?,
                    number(&Value::from(lon), "lon")?,
                );
            }
            match trimmed.split(',').collect::<Vec<_>>().as_slice() {
                [lat, lon] => Point::checked(
                    number(&Value::from(*lat), "lat")?,
                    number(&Value::from(*lon), "lon")?,
                ),
                _ => Err(format!(
                    "[{text}] is not a geo point: write \"lat,lon\" (geohashes are not supported)"
                )),
            }
        }
        other => Err(format!("{other} is not a geo point")),
    }
}

/// A distance in metres: a number is metres; a string is a number and a unit (`12km`,
/// `3.5mi`; Elasticsearch's units).
pub fn parse_distance(value: &Value) -> Result<f64, String> {
    let meters = match value {
        Value::Number(n) => n.as_f64().unwrap_or(f64::NAN),
        Value::String(text) => {
            let text = text.trim();
            let split = text
                .find(|c: char| c.is_ascii_alphabetic())
                .unwrap_or(text.len());
            let (amount, unit) = text.split_at(split);
            let amount: f64 = amount
                .trim()
                .parse()
                .map_err(|_| format!("failed to parse distance [{text}]"))?;
            let factor = match unit.trim() {
                "" | "m" | "meters" => 1.0,
                "km" | "kilometers" => 1000.0,
                "cm" | "centimeters" => 0.01,
                "mm" | "millimeters" => 0.001,
                "mi" | "miles" => 1609.344,
                "yd" | "yards" => 0.9144,
                "ft" | "feet" => 0.3048,
                "in" | "inch" => 0.0254,
                "NM" | "nmi" | "nauticalmiles" => 1852.0,
                other => return Err(format!("unknown distance unit [{other}] in [{text}]")),
            };
            amount * factor
        }
        other => return Err(format!("{other} is not a distance")),
    };
    if !meters.is_finite() || meters < 0.0 {
        return Err(format!("{value} is not a distance"));
    }
    Ok(meters)
}

/// The great-circle distance between two points, in metres (haversine, as Elasticsearch's
/// `arc` distance).
pub fn distance_m(a: Point, b: Point) -> f64 {
    let (lat1, lat2) = (a.lat.to_radians(), b.lat.to_radians());
    let dlat = lat2 - lat1;
    let dlon = (b.lon - a.lon).to_radians();
    let h = (dlat / 2.0).sin().powi(2) + lat1.cos() * lat2.cos() * (dlon / 2.0).sin().powi(2);
    2.0 * EARTH_RADIUS_M * h.sqrt().min(1.0).asin()
}

/// A latitude/longitude box; `left > right` when it crosses the antimeridian.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GeoBox {
    pub top: f64,
    pub bottom: f64,
    pub left: f64,
    pub right: f64,
}

/// Bounds a little wider than a circle's, so that rounding never leaves a point out.
const SLACK_DEG: f64 = 1e-7;

impl GeoBox {
    /// A box holding every point within `meters` of `center`.
    pub fn around(center: Point, meters: f64) -> GeoBox {
        let angle = meters / EARTH_RADIUS_M;
        let delta = angle.to_degrees() + SLACK_DEG;
        let (bottom, top) = (center.lat - delta, center.lat + delta);
        if bottom <= -90.0 || top >= 90.0 || angle >= std::f64::consts::PI {
            // A pole is inside: every longitude.
            return GeoBox {
                top: top.min(90.0),
                bottom: bottom.max(-90.0),
                left: -180.0,
                right: 180.0,
            };
        }
        let spread = (angle.sin() / center.lat.to_radians().cos())
            .min(1.0)
            .asin()
            .to_degrees()
            + SLACK_DEG;
        let wrap = |lon: f64| {
            if lon < -180.0 {
                lon + 360.0
            } else if lon > 180.0 {
                lon - 360.0
            } else {
                lon
            }
        };
        if spread >= 180.0 {
            return GeoBox {
                top,
                bottom,
                left: -180.0,
                right: 180.0,
            };
        }
        GeoBox {
            top,
            bottom,
            left: wrap(center.lon - spread),
            right: wrap(center.lon + spread),
        }
    }

    /// The box of a `geo_bounding_box` query: `top_left` and `bottom_right`, `top_right` and
    /// `bottom_left`, `top`/`left`/`bottom`/`right`, or `wkt` (`BBOX (left, right, top, bottom)`).
    pub fn parse(value: &Value) -> Result<GeoBox, String> {
        let Value::Object(object) = value else {
            return Err("a bounding box must be an object".to_owned());
        };
        if let Some(wkt) = object.get("wkt") {
            let text = wkt.as_str().ok_or("[wkt] must be a string")?;
            let inner = text
                .trim()
                .strip_prefix("BBOX")
                .or_else(|| text.trim().strip_prefix("bbox"))
                .and_then(|i| i.trim().strip_prefix('('))
                .and_then(|i| i.strip_suffix(')'))
                .ok_or_else(|| format!("malformed WKT envelope [{text}]"))?;
            let parts: Vec<f64> = inner
                .split(',')
                .map(|p| p.trim().parse::<f64>())
                .collect::<Result<_, _>>()
                .map_err(|_| format!("malformed WKT envelope [{text}]"))?;
            let [left, right, top, bottom] = parts[..] else {
                return Err(format!("malformed WKT envelope [{text}]"));
            };
            return GeoBox::checked(top, bottom, left, right);
        }
        let point = |key: &str| object.get(key).map(parse_point).transpose();
        let side = |key: &str| object.get(key).map(|v| number(v, key)).transpose();
        if let (Some(tl), Some(br)) = (point("top_left")?, point("bottom_right")?) {
            return GeoBox::checked(tl.lat, br.lat, tl.lon, br.lon);
        }
        if let (Some(tr), Some(bl)) = (point("top_right")?, point("bottom_left")?) {
            return GeoBox::checked(tr.lat, bl.lat, bl.lon, tr.lon);
        }
        if let (Some(top), Some(bottom), Some(left), Some(right)) =
            (side("top")?, side("bottom")?, side("left")?, side("right")?)
        {
            return GeoBox::checked(top, bottom, left, right);
        }
        Err(
            "a bounding box needs top_left and bottom_right, top_right and bottom_left, \
             top, left, bottom and right, or wkt"
                .to_owned(),
        )
    }

    fn checked(top: f64, bottom: f64, left: f64, right: f64) -> Result<GeoBox, String> {
        Point::checked(top, left)?;
        Point::checked(bottom, right)?;
        if top < bottom {
            return Err(format!(
                "top is below bottom: [{top}] is smaller than [{bottom}]"
            ));
        }
        Ok(GeoBox {
            top,
            bottom,
            left,
            right,
        })
    }

    pub fn contains(&self, point: Point) -> bool {
        let lat = point.lat >= self.bottom && point.lat <= self.top;
        let lon = match self.left <= self.right {
            true => point.lon >= self.left && point.lon <= self.right,
            false => point.lon >= self.left || point.lon <= self.right,
        };
        lat && lon
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn points_in_every_form() {
        let expected = Point {
            lat: 41.12,
            lon: -71.34,
        };
        for form in [
            json!({"lat": 41.12, "lon": -71.34}),
            json!({"lat": "41.12", "lon": "-71.34"}),
            json!("41.12,-71.34"),
            json!([-71.34, 41.12]),
            json!("POINT (-71.34 41.12)"),
            json!({"type": "Point", "coordinates": [-71.34, 41.12]}),
        ] {
            assert_eq!(parse_point(&form), Ok(expected), "{form}");
        }
        for bad in [
            json!({"lat": 91, "lon": 0}),
            json!({"lat": 1}),
            json!([1]),
            json!("drm3btev3e86"),
            json!(true),
        ] {
            assert!(parse_point(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn distances_and_units() {
        assert_eq!(parse_distance(&json!("12km")), Ok(12_000.0));
        assert_eq!(parse_distance(&json!("1 mi")), Ok(1609.344));
        assert_eq!(parse_distance(&json!(250)), Ok(250.0));
        assert_eq!(parse_distance(&json!("2NM")), Ok(3704.0));
        assert!(parse_distance(&json!("12 parsecs")).is_err());
        assert!(parse_distance(&json!(-1)).is_err());
        // Paris to London, about 344 km.
        let paris = Point {
            lat: 48.8566,
            lon: 2.3522,
        };
        let london = Point {
            lat: 51.5074,
            lon: -0.1278,
        };
        let d = distance_m(paris, london);
        assert!((343_000.0..345_000.0).contains(&d), "{d}");
    }

    #[test]
    fn boxes_hold_their_circles_across_the_antimeridian() {
        let center = Point {
            lat: 10.0,
            lon: 179.9,
        };
        let b = GeoBox::around(center, 50_000.0);
        assert!(b.left > b.right, "{b:?}");
        for (lat, lon) in [(10.0, -179.8), (10.3, 179.9), (9.7, 179.7)] {
            let p = Point { lat, lon };
            assert!(distance_m(center, p) < 50_000.0);
            assert!(b.contains(p), "{p:?} {b:?}");
        }
        assert!(!b.contains(Point {
            lat: 10.0,
            lon: 0.0
        }));
        let pole = GeoBox::around(
            Point {
                lat: 89.9,
                lon: 0.0,
            },
            50_000.0,
        );
        assert_eq!((pole.left, pole.right, pole.top), (-180.0, 180.0, 90.0));
    }

    #[test]
    fn bounding_boxes_in_every_form() {
        let expected = GeoBox {
            top: 40.73,
            bottom: 40.01,
            left: -74.1,
            right: -71.12,
        };
        for form in [
            json!({"top_left": {"lat": 40.73, "lon": -74.1}, "bottom_right": {"lat": 40.01, "lon": -71.12}}),
            json!({"top_right": [-71.12, 40.73], "bottom_left": [-74.1, 40.01]}),
            json!({"top": 40.73, "left": -74.1, "bottom": 40.01, "right": -71.12}),
            json!({"wkt": "BBOX (-74.1, -71.12, 40.73, 40.01)"}),
        ] {
            assert_eq!(GeoBox::parse(&form), Ok(expected), "{form}");
        }
        assert!(GeoBox::parse(&json!({"top": 1, "bottom": 2, "left": 0, "right": 1})).is_err());
    }
}
