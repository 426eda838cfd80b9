//! Row heads: the fields of a committed row every index keeps (its seq, kind, role,
//! window and the head keys of `meta`), and how a stored line is read for them. The strict
//! parse takes them in one pass and checks every other value exactly as a
//! `serde_json::Value` reader checks it (see `wellformed`): a line it accepts is a row;
//! one it refuses is read again leniently only to learn the seq it shows and whether it
//! may be a soft clear (a floor, fail closed). The byte stores hold these heads without
//! reading them: the file store is generic over its rows' reader, and [`Rows`] is the one
//! the transcript layer gives it (`file_store.rs`).

use serde::de::{Deserializer, MapAccess, Visitor};
use serde::Deserialize;

use crate::store::frame::{Entry, LineRead, ReadLine};
use crate::store::wellformed::Checked;

/// The line reader of every store: a line is a row when its strict head parses.
#[derive(Debug, Clone, Copy, Default)]
pub struct Rows;

impl ReadLine for Rows {
    type Head = RowHead;

    fn read_line(line: &[u8]) -> LineRead<RowHead> {
        read_line(line)
    }

    fn seq(head: &RowHead) -> u64 {
        head.seq
    }
}

/// An index entry of a stored row line, its head read by [`Rows`].
pub(crate) type RowEntry = Entry<RowHead>;

/// The fields of a row every store's index keeps (the head keys of `meta` included).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RowHead {
    /// `seq`.
    pub seq: u64,
    /// `kind`.
    pub kind: String,
    /// `role`, when the row has one.
    pub role: Option<String>,
    /// `window`, when the row records one.
    pub window: Option<String>,
    /// `meta.boundary_kind`.
    pub boundary_kind: Option<String>,
    /// `meta.rollover_id`.
    pub rollover_id: Option<String>,
    /// `meta.retracts`.
    pub retracts: Option<u64>,
    /// `meta.rejected` is present and not null (a quarantined request).
    pub rejected: bool,
}

#[derive(Deserialize)]
struct RawHead<'a> {
    seq: u64,
    #[serde(borrow)]
    kind: std::borrow::Cow<'a, str>,
    #[serde(default, borrow)]
    role: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, borrow)]
    window: Option<std::borrow::Cow<'a, str>>,
    #[serde(default)]
    meta: Option<FromObject<RawMeta>>,
}

/// Only the seq of a line, for a line whose head does not parse. Like a `Value` reader,
/// the last of repeated `seq` keys wins.
struct SeqOnly(u64);

impl<'de> Deserialize<'de> for SeqOnly {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct SeqVisitor;
        impl<'de> serde::de::Visitor<'de> for SeqVisitor {
            type Value = SeqOnly;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object with a seq")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<SeqOnly, A::Error> {
                let mut seq = None;
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    if key == "seq" {
                        seq = Some(map.next_value::<u64>()?);
                    } else {
                        map.next_value::<serde::de::IgnoredAny>()?;
                    }
                }
                seq.map(SeqOnly)
                    .ok_or_else(|| serde::de::Error::missing_field("seq"))
            }
        }
        d.deserialize_map(SeqVisitor)
    }
}

/// `T` read only from a JSON object. serde also reads a struct from an array, by
/// position, which no reader of rows does: `"meta":["reset"]` is not a reset.
struct FromObject<T>(T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for FromObject<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct ObjectVisitor<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> serde::de::Visitor<'de> for ObjectVisitor<T> {
            type Value = T;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
                T::deserialize(serde::de::value::MapAccessDeserializer::new(map))
            }
        }
        d.deserialize_map(ObjectVisitor(std::marker::PhantomData))
            .map(FromObject)
    }
}

#[derive(Deserialize, Default)]
struct RawMeta {
    #[serde(default)]
    boundary_kind: Option<String>,
    #[serde(default)]
    rollover_id: Option<String>,
    #[serde(default)]
    retracts: Option<u64>,
    #[serde(default)]
    rejected: Option<serde::de::IgnoredAny>,
}

/// Reads one line for the index.
pub(crate) fn read_line(line: &[u8]) -> LineRead<RowHead> {
    if let Some(head) = parse_strict(line) {
        return LineRead {
            head: Some(head),
            claimed_seq: None,
            reset_like: false,
        };
    }
    let head = parse_head(line);
    let claimed_seq = match &head {
        Some(h) => Some(h.seq),
        None => serde_json::from_slice::<SeqOnly>(line).ok().map(|s| s.0),
    };
    LineRead {
        claimed_seq,
        reset_like: head.as_ref().is_some_and(RowHead::is_floor) || looks_like_reset(line),
        head: None,
    }
}

/// The head of a line, its other fields skipped without checking them: whether the line
/// is a row is `read_line`'s to say. Alone it serves where a damaged byte elsewhere in a
/// row must not hide what its head says (a soft clear in a torn tail).
fn parse_head(line: &[u8]) -> Option<RowHead> {
    let FromObject(raw) = serde_json::from_slice::<FromObject<RawHead<'_>>>(line).ok()?;
    let meta = raw.meta.map(|m| m.0).unwrap_or_default();
    Some(RowHead {
        seq: raw.seq,
        kind: raw.kind.into_owned(),
        role: raw.role.map(|r| r.into_owned()),
        window: raw.window.map(|w| w.into_owned()),
        boundary_kind: meta.boundary_kind,
        rollover_id: meta.rollover_id,
        retracts: meta.retracts,
        rejected: meta.rejected.is_some(),
    })
}

impl RowHead {
    /// Whether this row is a privacy floor: a boundary that is not a rollover (a reset,
    /// or a boundary whose kind is missing or unknown — fail closed).
    pub(crate) fn is_floor(&self) -> bool {
        super::rules::is_floor(&self.kind, self.boundary_kind.as_deref())
    }

    /// What the window fold reads of this row.
    pub(crate) fn as_head(&self) -> super::Head<'_> {
        super::Head {
            seq: self.seq,
            kind: &self.kind,
            role: self.role.as_deref(),
            boundary_kind: self.boundary_kind.as_deref(),
            rollover_id: self.rollover_id.as_deref(),
            retracts: self.retracts,
            rejected: self.rejected,
        }
    }
}

/// The highest seq of a soft clear in the bytes of a torn tail, judged from the rows in
/// it whose head parses (never from substrings: a tool output mentioning `"boundary"`
/// and `"reset"` is not a floor).
pub(crate) fn tail_floor_seq(tail: &[u8]) -> Option<u64> {
    tail.split(|&b| b == b'\n')
        .filter_map(parse_head)
        .filter(RowHead::is_floor)
        .map(|h| h.seq)
        .max()
}

/// Whether a committed line that does not parse as a row looks like a reset boundary:
/// such a line is a privacy floor (fail closed).
pub(crate) fn looks_like_reset(line: &[u8]) -> bool {
    let has = |needle: &[u8]| line.windows(needle.len()).any(|w| w == needle);
    has(b"\"boundary\"") && has(b"\"reset\"")
}

/// The head of `line` if all of it is a row every reader parses.
pub(crate) fn parse_strict(line: &[u8]) -> Option<RowHead> {
    serde_json::from_slice::<StrictHead>(line).ok().map(|h| h.0)
}

/// Keys of a row the head keeps; anything else is only checked.
enum RowKey {
    Seq,
    Kind,
    Role,
    Window,
    Meta,
    Other,
}

/// Keys of `meta` the head keeps.
enum MetaKey {
    BoundaryKind,
    RolloverId,
    Retracts,
    Rejected,
    Other,
}

/// An object key, matched without allocating.
trait Key: Sized {
    fn of(name: &str) -> Self;
}

impl Key for RowKey {
    fn of(name: &str) -> Self {
        match name {
            "seq" => RowKey::Seq,
            "kind" => RowKey::Kind,
            "role" => RowKey::Role,
            "window" => RowKey::Window,
            "meta" => RowKey::Meta,
            _ => RowKey::Other,
        }
    }
}

impl Key for MetaKey {
    fn of(name: &str) -> Self {
        match name {
            "boundary_kind" => MetaKey::BoundaryKind,
            "rollover_id" => MetaKey::RolloverId,
            "retracts" => MetaKey::Retracts,
            "rejected" => MetaKey::Rejected,
            _ => MetaKey::Other,
        }
    }
}

struct KeyOf<K>(K);

impl<'de, K: Key> Deserialize<'de> for KeyOf<K> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor<K>(std::marker::PhantomData<K>);
        impl<'de, K: Key> Visitor<'de> for KeyVisitor<K> {
            type Value = KeyOf<K>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object key")
            }
            fn visit_str<E>(self, name: &str) -> Result<KeyOf<K>, E> {
                Ok(KeyOf(K::of(name)))
            }
        }
        d.deserialize_str(KeyVisitor(std::marker::PhantomData))
    }
}

/// A row's head; like a `Value` reader, the last of repeated keys wins.
struct StrictHead(RowHead);

impl<'de> Deserialize<'de> for StrictHead {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct HeadVisitor;
        impl<'de> Visitor<'de> for HeadVisitor {
            type Value = StrictHead;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a row object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<StrictHead, A::Error> {
                let (mut seq, mut kind) = (None, None);
                let mut head = RowHead::default();
                while let Some(KeyOf(key)) = map.next_key::<KeyOf<RowKey>>()? {
                    match key {
                        RowKey::Seq => seq = Some(map.next_value::<u64>()?),
                        RowKey::Kind => kind = Some(map.next_value::<String>()?),
                        RowKey::Role => head.role = map.next_value()?,
                        RowKey::Window => head.window = map.next_value()?,
                        RowKey::Meta => {
                            let meta = map.next_value::<Option<StrictMeta>>()?;
                            let meta = meta.unwrap_or_default();
                            head.boundary_kind = meta.boundary_kind;
                            head.rollover_id = meta.rollover_id;
                            head.retracts = meta.retracts;
                            head.rejected = meta.rejected;
                        }
                        RowKey::Other => {
                            map.next_value::<Checked>()?;
                        }
                    }
                }
                head.seq = seq.ok_or_else(|| serde::de::Error::missing_field("seq"))?;
                head.kind = kind.ok_or_else(|| serde::de::Error::missing_field("kind"))?;
                Ok(StrictHead(head))
            }
        }
        d.deserialize_map(HeadVisitor)
    }
}

/// A `meta` value the head reads as `T` when it is one and as absent otherwise, as the
/// writers read it (`Value::as_u64`, `Value::as_str`); checked either way.
struct IfType<T>(Option<T>);

/// The types the head reads from `meta`.
trait FromScalar: Sized {
    fn from_u64(_: u64) -> Option<Self> {
        None
    }
    fn from_str(_: &str) -> Option<Self> {
        None
    }
}

impl FromScalar for u64 {
    fn from_u64(v: u64) -> Option<Self> {
        Some(v)
    }
}

impl FromScalar for String {
    fn from_str(v: &str) -> Option<Self> {
        Some(v.to_owned())
    }
}

impl<'de, T: FromScalar> Deserialize<'de> for IfType<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct IfVisitor<T>(std::marker::PhantomData<T>);
        impl<'de, T: FromScalar> Visitor<'de> for IfVisitor<T> {
            type Value = IfType<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_u64<E>(self, v: u64) -> Result<IfType<T>, E> {
                Ok(IfType(T::from_u64(v)))
            }
            fn visit_i64<E>(self, _: i64) -> Result<IfType<T>, E> {
                Ok(IfType(None))
            }
            fn visit_f64<E>(self, _: f64) -> Result<IfType<T>, E> {
                Ok(IfType(None))
            }
            fn visit_bool<E>(self, _: bool) -> Result<IfType<T>, E> {
                Ok(IfType(None))
            }
            fn visit_str<E>(self, v: &str) -> Result<IfType<T>, E> {
                Ok(IfType(T::from_str(v)))
            }
            fn visit_unit<E>(self) -> Result<IfType<T>, E> {
                Ok(IfType(None))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                seq: A,
            ) -> Result<IfType<T>, A::Error> {
                Checked::deserialize(serde::de::value::SeqAccessDeserializer::new(seq))?;
                Ok(IfType(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<IfType<T>, A::Error> {
                Checked::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
                Ok(IfType(None))
            }
        }
        d.deserialize_any(IfVisitor(std::marker::PhantomData))
    }
}

/// The parts of `meta` the head keeps (an object; `null` is no meta).
#[derive(Default)]
struct StrictMeta {
    boundary_kind: Option<String>,
    rollover_id: Option<String>,
    retracts: Option<u64>,
    rejected: bool,
}

impl<'de> Deserialize<'de> for StrictMeta {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct MetaVisitor;
        impl<'de> Visitor<'de> for MetaVisitor {
            type Value = StrictMeta;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a meta object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<StrictMeta, A::Error> {
                let mut meta = StrictMeta::default();
                while let Some(KeyOf(key)) = map.next_key::<KeyOf<MetaKey>>()? {
                    match key {
                        MetaKey::BoundaryKind => {
                            meta.boundary_kind = map.next_value::<IfType<String>>()?.0;
                        }
                        MetaKey::RolloverId => {
                            meta.rollover_id = map.next_value::<IfType<String>>()?.0;
                        }
                        MetaKey::Retracts => meta.retracts = map.next_value::<IfType<u64>>()?.0,
                        MetaKey::Rejected => {
                            meta.rejected = map.next_value::<Option<Checked>>()?.is_some();
                        }
                        MetaKey::Other => {
                            map.next_value::<Checked>()?;
                        }
                    }
                }
                Ok(meta)
            }
        }
        d.deserialize_map(MetaVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::{parse_strict, RowHead};
    use crate::store::wellformed::is_wellformed;

    #[test]
    fn keeps_the_head_and_refuses_what_readers_refuse() {
        let row = br#"{"seq":3,"kind":"boundary","role":"system","window":"w:3","parts":[],"meta":{"boundary_kind":"reset","x":[1,{"y":null}],"rejected":null}}"#;
        assert_eq!(
            parse_strict(row),
            Some(RowHead {
                seq: 3,
                kind: "boundary".into(),
                role: Some("system".into()),
                window: Some("w:3".into()),
                boundary_kind: Some("reset".into()),
                ..RowHead::default()
            })
        );
        let deep = format!(
            "{{\"seq\":1,\"kind\":\"message\",\"x\":{}{}}}",
            "[".repeat(200),
            "]".repeat(200)
        );
        for line in [
            b"{\"seq\":1,\"kind\":\"message\",\"parts\":[{\"\xf4ype\":\"text\"}]}".to_vec(),
            br#"{"seq":1,"kind":"message","x":"\ud800"}"#.to_vec(),
            br#"{"seq":1,"kind":"message","meta":{"n":1e400}}"#.to_vec(),
            br#"{"seq":1,"kind":"message","meta":["reset"]}"#.to_vec(),
            br#"[1,"message"]"#.to_vec(),
            deep.into_bytes(),
        ] {
            assert_eq!(
                parse_strict(&line),
                None,
                "{}",
                String::from_utf8_lossy(&line)
            );
        }
        // Head keys of other types in `meta` are absent, as writers read them.
        let odd = br#"{"seq":4,"kind":"message","meta":{"retracts":1.5,"boundary_kind":7,"rollover_id":{"a":[1]}}}"#;
        let head = parse_strict(odd);
        assert_eq!(
            head.as_ref()
                .map(|h| (h.retracts, h.boundary_kind.clone(), h.rollover_id.clone())),
            Some((None, None, None))
        );
        // Repeated keys: the last wins, as for a `Value` reader.
        let twice = br#"{"seq":1,"seq":2,"kind":"message","meta":{"rejected":1}}"#;
        assert!(is_wellformed(twice));
        let head = parse_strict(twice);
        assert_eq!(head.as_ref().map(|h| (h.seq, h.rejected)), Some((2, true)));
    }
}
