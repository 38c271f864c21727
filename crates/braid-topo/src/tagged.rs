//! Internally tagged enums (`kind = "leaf-spine"`, `pattern = "poisson"`) whose deserialisation
//! keeps key paths.
//!
//! serde's `#[serde(tag = "...")]` buffers the whole table before choosing the variant, so errors
//! inside it lose their path (`serde_path_to_error` can only say `topology`, not
//! `topology.host_link.rate`). Here the tag is read first (keys before it, if any, are buffered),
//! then the rest of the table is handed, unbuffered, to an externally tagged mirror enum derived by
//! serde, whose variant's struct (the kind's own config) reads it — so every value below is
//! deserialised straight from the caller's map and its key path is tracked. The public enum keeps
//! the derived internally tagged `Serialize` and `JsonSchema`.

use serde::de::{
    self, DeserializeSeed, Deserializer, EnumAccess, IntoDeserializer, MapAccess, VariantAccess,
    Visitor,
};
use std::fmt;
use std::marker::PhantomData;

/// Defines `pub enum $name` (internally tagged by `$tag`, kebab-case variants; Serialize +
/// JsonSchema derived) whose every variant wraps one kind's own config struct (which rejects
/// unknown fields itself), its path-preserving `Deserialize`, and `$name::kind()`, the variant's
/// config as a `&dyn $kind` (the one place the variants are listed: adding a kind is a line here
/// and a file beside it).
macro_rules! tagged_enum {
    (
        tag = $tag:literal, mirror = $mirror:ident, kind = $kind:path, expecting = $expecting:literal;
        $(#[$meta:meta])*
        pub enum $name:ident {
            $(
                $(#[$vmeta:meta])*
                $variant:ident($ty:ty)
            ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq, serde::Serialize, schemars::JsonSchema)]
        #[serde(tag = $tag, rename_all = "kebab-case")]
        pub enum $name {
            $(
                $(#[$vmeta])*
                $variant($ty)
            ),*
        }

        #[derive(serde::Deserialize)]
        #[serde(rename_all = "kebab-case")]
        enum $mirror {
            $( $variant($ty) ),*
        }

        impl From<$mirror> for $name {
            fn from(m: $mirror) -> $name {
                match m {
                    $( $mirror::$variant(x) => $name::$variant(x) ),*
                }
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                d.deserialize_map($crate::tagged::TaggedVisitor::<$mirror>::new($tag, $expecting)).map(Into::into)
            }
        }

        impl $name {
            /// This table's kind, behind its trait.
            pub fn kind(&self) -> &dyn $kind {
                match self {
                    $( $name::$variant(x) => x ),*
                }
            }
        }
    };
}

pub(crate) use tagged_enum;

#[doc(hidden)]
pub struct TaggedVisitor<M> {
    tag: &'static str,
    expecting: &'static str,
    _m: PhantomData<M>,
}

impl<M> TaggedVisitor<M> {
    pub fn new(tag: &'static str, expecting: &'static str) -> Self {
        TaggedVisitor {
            tag,
            expecting,
            _m: PhantomData,
        }
    }
}

impl<'de, M: de::Deserialize<'de>> Visitor<'de> for TaggedVisitor<M> {
    type Value = M;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.expecting)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<M, A::Error> {
        let mut buffered: Vec<(String, serde_json::Value)> = Vec::new();
        loop {
            match map.next_key::<String>()? {
                None => return Err(de::Error::missing_field(self.tag)),
                Some(k) if k == self.tag => {
                    let variant: String = map.next_value()?;
                    return M::deserialize(EnumDe {
                        variant,
                        rest: Chain {
                            buffered: buffered.into_iter(),
                            pending: None,
                            map,
                        },
                    });
                }
                Some(k) => {
                    let v: serde_json::Value = map.next_value()?;
                    buffered.push((k, v));
                }
            }
        }
    }
}

/// The table's remaining entries: those read before the tag, then the live map.
struct Chain<A> {
    buffered: std::vec::IntoIter<(String, serde_json::Value)>,
    pending: Option<(String, serde_json::Value)>,
    map: A,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for Chain<A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        if let Some((k, v)) = self.buffered.next() {
            let key = seed.deserialize(IntoDeserializer::<'de, A::Error>::into_deserializer(
                k.clone(),
            ))?;
            self.pending = Some((k, v));
            return Ok(Some(key));
        }
        self.map.next_key_seed(seed)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        if let Some((k, v)) = self.pending.take() {
            return seed
                .deserialize(v)
                .map_err(|e| de::Error::custom(format_args!("{k}: {e}")));
        }
        self.map.next_value_seed(seed)
    }
}

/// Presents (variant name, rest of the table) as an externally tagged enum.
struct EnumDe<A> {
    variant: String,
    rest: Chain<A>,
}

impl<'de, A: MapAccess<'de>> Deserializer<'de> for EnumDe<A> {
    type Error = A::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, A::Error> {
        visitor.visit_enum(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, A::Error> {
        visitor.visit_enum(self)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option unit
        unit_struct newtype_struct seq tuple tuple_struct map struct identifier ignored_any
    }
}

impl<'de, A: MapAccess<'de>> EnumAccess<'de> for EnumDe<A> {
    type Error = A::Error;
    type Variant = Chain<A>;

    fn variant_seed<V: DeserializeSeed<'de>>(
        self,
        seed: V,
    ) -> Result<(V::Value, Chain<A>), A::Error> {
        let v = seed.deserialize(IntoDeserializer::<'de, A::Error>::into_deserializer(
            self.variant,
        ))?;
        Ok((v, self.rest))
    }
}

impl<'de, A: MapAccess<'de>> VariantAccess<'de> for Chain<A> {
    type Error = A::Error;

    fn unit_variant(self) -> Result<(), A::Error> {
        Err(de::Error::custom("unexpected unit variant"))
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, A::Error> {
        // The kind's own struct reads the rest of the table, straight from the caller's map.
        seed.deserialize(de::value::MapAccessDeserializer::new(self))
    }

    fn tuple_variant<V: Visitor<'de>>(
        self,
        _len: usize,
        _visitor: V,
    ) -> Result<V::Value, A::Error> {
        Err(de::Error::custom("unexpected tuple variant"))
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, A::Error> {
        visitor.visit_map(self)
    }
}
