//! Snapshots in S3-compatible object storage ([`S3Store`]), for servers that share one store
//! or keep no state on their own disk. Objects are `<prefix>/<id>.snap`; one PUT writes a whole
//! object (S3 makes it visible whole or not at all), which is the atomicity [`SnapshotStore`]
//! asks for. Credentials, region and endpoint come from the usual AWS variables.

use std::error::Error as _;
use std::sync::Arc;
use std::time::Duration;

use ::object_store::aws::{AmazonS3, AmazonS3Builder, AmazonS3ConfigKey};
use ::object_store::path::Path;
use ::object_store::{
    BackoffConfig, Error as ObjectError, ObjectStore, ObjectStoreExt, PutMode, PutOptions,
    PutPayload, RetryConfig, UpdateVersion,
};
use anyhow::Context;
use futures_util::TryStreamExt;
use futures_util::future::BoxFuture;

use super::records::{Expect, Found, RecordName, RecordStore, Version};
use super::store::{SnapshotId, SnapshotStore};
use super::store_error::StoreError;

/// Snapshots as objects `<prefix>/<id>.snap` in one bucket of S3-compatible storage.
pub struct S3Store {
    store: AmazonS3,
    bucket: String,
    prefix: Path,
    endpoint: Option<String>,
}

/// How long a request is retried (transport errors, 5xx) before the caller gets a 503: a few
/// quick tries, not the client's default of minutes, so a store that is down answers fast.
fn retry() -> RetryConfig {
    RetryConfig {
        backoff: BackoffConfig {
            init_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(2),
            base: 2.0,
        },
        max_retries: 3,
        retry_timeout: Duration::from_secs(15),
    }
}

/// `s3://bucket/optional/prefix` as a bucket and a prefix (`Path::ROOT` when none).
fn parse_url(url: &str) -> anyhow::Result<(String, Path)> {
    let rest = url
        .strip_prefix("s3://")
        .context("expected s3://bucket/optional/prefix")?;
    anyhow::ensure!(
        !rest.contains(['?', '#']),
        "a query or fragment has no meaning in s3://bucket/optional/prefix"
    );
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    // S3's naming rules for buckets, so a typo fails at startup, not at the first snapshot.
    let name_ok = (3..=63).contains(&bucket.len())
        && bucket
            .bytes()
            .all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'.' | b'-'))
        && bucket.starts_with(|c: char| c.is_ascii_alphanumeric())
        && bucket.ends_with(|c: char| c.is_ascii_alphanumeric());
    anyhow::ensure!(
        name_ok,
        "{bucket:?} is not a bucket name (3 to 63 of a-z, 0-9, '.', '-')"
    );
    let prefix = Path::parse(prefix.trim_end_matches('/'))
        .with_context(|| format!("{prefix:?} is not an object prefix"))?;
    Ok((bucket.to_string(), prefix))
}

/// An error and its causes on one line (object_store's errors nest the useful part).
fn chain(e: &ObjectError) -> String {
    let mut message = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        source = cause.source();
    }
    message
}

impl S3Store {
    /// The store for `url` (`s3://bucket/optional/prefix`), configured from the environment:
    /// `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION` / `AWS_DEFAULT_REGION`,
    /// `AWS_ENDPOINT_URL` / `AWS_ENDPOINT` (for storage other than AWS). Plain HTTP is allowed
    /// only when the endpoint is an `http://` URL. Nothing is sent until the first request.
    pub fn from_env(url: &str) -> anyhow::Result<Arc<Self>> {
        let (bucket, prefix) = parse_url(url)?;
        let builder = AmazonS3Builder::from_env().with_bucket_name(&bucket);
        let endpoint = builder
            .get_config_value(&AmazonS3ConfigKey::S3Endpoint)
            .or_else(|| builder.get_config_value(&AmazonS3ConfigKey::Endpoint));
        let plain_http = endpoint
            .as_deref()
            .is_some_and(|e| e.to_ascii_lowercase().starts_with("http://"));
        let store = builder
            .with_allow_http(plain_http)
            .with_retry(retry())
            .build()
            .context("configuring S3 from the AWS_* environment")?;
        Ok(Arc::new(S3Store {
            store,
            bucket,
            prefix,
            endpoint,
        }))
    }

    /// The bucket as an object store and the prefix this store keeps under (volumes are
    /// kept beside snapshots: `volumes/shared.rs`).
    pub fn objects(&self) -> (Arc<dyn ObjectStore>, Path) {
        (Arc::new(self.store.clone()), self.prefix.clone())
    }

    fn object(&self, id: &SnapshotId) -> Path {
        self.prefix.clone().join(format!("{id}.snap"))
    }

    fn record(&self, name: &RecordName) -> Path {
        self.prefix.clone().join(format!("{}.rec", name.as_str()))
    }

    fn err(&self, what: &str, e: &ObjectError) -> StoreError {
        StoreError {
            store: self.describe(),
            message: format!("{what}: {}", chain(e)),
        }
    }

    /// Whether `id` exists, and its size.
    async fn size(&self, id: &SnapshotId) -> Result<Option<u64>, StoreError> {
        match self.store.head(&self.object(id)).await {
            Ok(meta) => Ok(Some(meta.size)),
            Err(ObjectError::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.err("HEAD", &e)),
        }
    }
}

/// Records as objects `<prefix>/<name>.rec`, replaced with S3's conditional writes
/// (`If-None-Match: *` to create, `If-Match: <ETag>` to replace): the store decides, so two
/// nodes never both win.
impl RecordStore for S3Store {
    fn get_record<'a>(&'a self, name: &'a RecordName) -> BoxFuture<'a, Result<Found, StoreError>> {
        Box::pin(async move {
            let got = match self.store.get(&self.record(name)).await {
                Ok(got) => got,
                Err(ObjectError::NotFound { .. }) => return Ok(None),
                Err(e) => return Err(self.err("GET", &e)),
            };
            let Some(tag) = got.meta.e_tag.clone() else {
                return Err(StoreError {
                    store: self.describe(),
                    message: "the store gave a record without an ETag (conditional writes \
                              are required)"
                        .into(),
                });
            };
            let bytes = got.bytes().await.map_err(|e| self.err("GET", &e))?;
            Ok(Some((Vec::from(bytes), Version(tag))))
        })
    }

    fn put_record<'a>(
        &'a self,
        name: &'a RecordName,
        bytes: Vec<u8>,
        expect: Expect<'a>,
    ) -> BoxFuture<'a, Result<Option<Version>, StoreError>> {
        Box::pin(async move {
            let mode = match expect {
                Expect::Absent => PutMode::Create,
                Expect::At(v) => PutMode::Update(UpdateVersion {
                    e_tag: Some(v.0.clone()),
                    version: None,
                }),
            };
            let opts = PutOptions {
                mode,
                ..Default::default()
            };
            match self
                .store
                .put_opts(&self.record(name), PutPayload::from(bytes), opts)
                .await
            {
                // Written, but without an ETag the next compare-and-swap has nothing to
                // compare: an error, not a lost race (as a read without one is).
                Ok(done) => match done.e_tag {
                    Some(tag) => Ok(Some(Version(tag))),
                    None => Err(StoreError {
                        store: self.describe(),
                        message: "the store wrote a record but gave no ETag (conditional \
                                  writes are required)"
                            .into(),
                    }),
                },
                Err(ObjectError::AlreadyExists { .. } | ObjectError::Precondition { .. }) => {
                    Ok(None)
                }
                Err(e) => Err(self.err("conditional PUT", &e)),
            }
        })
    }

    fn delete_record<'a>(&'a self, name: &'a RecordName) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            match self.store.delete(&self.record(name)).await {
                Ok(()) | Err(ObjectError::NotFound { .. }) => Ok(()),
                Err(e) => Err(self.err("DELETE", &e)),
            }
        })
    }
}

impl SnapshotStore for S3Store {
    fn put<'a>(
        &'a self,
        id: &'a SnapshotId,
        bytes: Vec<u8>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            self.store
                .put(&self.object(id), PutPayload::from(bytes))
                .await
                .map(|_| ())
                .map_err(|e| self.err("PUT", &e))
        })
    }

    fn get<'a>(&'a self, id: &'a SnapshotId) -> BoxFuture<'a, Result<Option<Vec<u8>>, StoreError>> {
        Box::pin(async move {
            let got = match self.store.get(&self.object(id)).await {
                Ok(got) => got,
                Err(ObjectError::NotFound { .. }) => return Ok(None),
                Err(e) => return Err(self.err("GET", &e)),
            };
            let bytes = got.bytes().await.map_err(|e| self.err("GET", &e))?;
            Ok(Some(Vec::from(bytes)))
        })
    }

    fn get_prefix<'a>(
        &'a self,
        id: &'a SnapshotId,
        len: usize,
    ) -> BoxFuture<'a, Result<Option<Vec<u8>>, StoreError>> {
        Box::pin(async move {
            // An empty range is no request S3 takes; the empty prefix of an object is its
            // existence.
            if len == 0 {
                return Ok(self.size(id).await?.map(|_| Vec::new()));
            }
            // A range past the end is cut to the object's size (by S3 and by the client).
            match self.store.get_range(&self.object(id), 0..len as u64).await {
                Ok(bytes) => Ok(Some(Vec::from(bytes))),
                Err(ObjectError::NotFound { .. }) => Ok(None),
                // No range of an empty object is satisfiable (416): its prefix is empty.
                Err(e) => match self.size(id).await {
                    Ok(Some(0)) => Ok(Some(Vec::new())),
                    Ok(None) => Ok(None),
                    _ => Err(self.err("ranged GET", &e)),
                },
            }
        })
    }

    fn delete<'a>(&'a self, id: &'a SnapshotId) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move {
            // S3's DELETE succeeds whether or not the object was there: ask first.
            if self.size(id).await?.is_none() {
                return Ok(false);
            }
            match self.store.delete(&self.object(id)).await {
                Ok(()) | Err(ObjectError::NotFound { .. }) => Ok(true),
                Err(e) => Err(self.err("DELETE", &e)),
            }
        })
    }

    fn list(&self) -> BoxFuture<'_, Result<Vec<SnapshotId>, StoreError>> {
        Box::pin(async move {
            let prefix = (self.prefix != Path::ROOT).then_some(&self.prefix);
            let objects: Vec<_> = self
                .store
                .list(prefix)
                .try_collect()
                .await
                .map_err(|e| self.err("LIST", &e))?;
            let mut ids: Vec<SnapshotId> = objects
                .into_iter()
                .filter_map(|meta| {
                    let id = meta
                        .location
                        .filename()?
                        .strip_suffix(".snap")
                        .and_then(SnapshotId::parse)?;
                    // Only the prefix's own objects, not those of a deeper "folder".
                    (self.object(&id) == meta.location).then_some(id)
                })
                .collect();
            ids.sort();
            Ok(ids)
        })
    }

    fn describe(&self) -> String {
        let mut place = format!("s3://{}", self.bucket);
        if self.prefix != Path::ROOT {
            place = format!("{place}/{}", self.prefix);
        }
        match &self.endpoint {
            Some(endpoint) => format!("object storage {place} at {endpoint}"),
            None => format!("object storage {place}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_name_a_bucket_and_a_prefix() {
        let (bucket, prefix) = parse_url("s3://snaps").unwrap();
        assert_eq!((bucket.as_str(), prefix), ("snaps", Path::ROOT));
        let (bucket, prefix) = parse_url("s3://my.snaps-1/a/b/").unwrap();
        assert_eq!(bucket, "my.snaps-1");
        assert_eq!(prefix.as_ref(), "a/b");
        assert_eq!(prefix.join("x.snap").as_ref(), "a/b/x.snap");
        for bad in [
            "http://bucket/x",
            "s3://",
            "s3:///prefix",
            "s3://ab",
            "s3://Bucket",
            "s3://-bucket",
            "s3://bucket_1",
            "s3://bucket/a//b",
            "s3://bucket/../x",
            "s3://bucket/x?versionId=1",
        ] {
            assert!(parse_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_store_names_its_place_and_only_its_own_objects() {
        let store = S3Store::from_env("s3://snaps/team/a").unwrap();
        assert!(
            store
                .describe()
                .starts_with("object storage s3://snaps/team/a"),
            "{}",
            store.describe()
        );
        let id = SnapshotId::random();
        assert_eq!(store.object(&id).as_ref(), format!("team/a/{id}.snap"));
        let root = S3Store::from_env("s3://snaps").unwrap();
        assert_eq!(root.object(&id).as_ref(), format!("{id}.snap"));
    }
}
