//! The gRPC codec of the node service: each message is one postcard encoding of a serde type
//! (spec: docs/format/cluster-rpc.md). gRPC frames carry the length; the server bounds it
//! (`MESSAGE_BYTES_MAX`), so a peer cannot make a node buffer more than that per call.

use bytes::{Buf, BufMut};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::marker::PhantomData;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::Status;

/// Encodes `Encode` and decodes `Decode` with postcard.
#[derive(Debug)]
pub struct PostcardCodec<Encode, Decode>(PhantomData<(Encode, Decode)>);

impl<Encode, Decode> Default for PostcardCodec<Encode, Decode> {
    fn default() -> Self {
        PostcardCodec(PhantomData)
    }
}

impl<Encode, Decode> Codec for PostcardCodec<Encode, Decode>
where
    Encode: Serialize + Send + 'static,
    Decode: DeserializeOwned + Send + 'static,
{
    type Encode = Encode;
    type Decode = Decode;
    type Encoder = PostcardEncoder<Encode>;
    type Decoder = PostcardDecoder<Decode>;

    fn encoder(&mut self) -> Self::Encoder {
        PostcardEncoder(PhantomData)
    }

    fn decoder(&mut self) -> Self::Decoder {
        PostcardDecoder(PhantomData)
    }
}

#[derive(Debug)]
pub struct PostcardEncoder<T>(PhantomData<T>);

impl<T: Serialize> Encoder for PostcardEncoder<T> {
    type Item = T;
    type Error = Status;

    fn encode(&mut self, item: T, destination: &mut EncodeBuf<'_>) -> Result<(), Status> {
        postcard::to_io(&item, destination.writer())
            .map(|_| ())
            .map_err(|e| Status::internal(format!("cannot encode a message: {e}")))
    }
}

#[derive(Debug)]
pub struct PostcardDecoder<T>(PhantomData<T>);

impl<T: DeserializeOwned> Decoder for PostcardDecoder<T> {
    type Item = T;
    type Error = Status;

    fn decode(&mut self, source: &mut DecodeBuf<'_>) -> Result<Option<T>, Status> {
        let length = source.remaining();
        let bytes = source.copy_to_bytes(length);
        let (item, rest) = postcard::take_from_bytes(&bytes).map_err(|e| {
            Status::invalid_argument(format!("malformed {length}-byte message: {e}"))
        })?;
        if !rest.is_empty() {
            return Err(Status::invalid_argument(format!(
                "malformed {length}-byte message: {} bytes after its end",
                rest.len()
            )));
        }
        Ok(Some(item))
    }
}
