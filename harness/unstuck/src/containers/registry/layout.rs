//! The test image as `ci/build-images.sh` leaves it: an OCI image layout
//! in a tar (`index.json`, `blobs/sha256/<digest>`). Read whole: it is a
//! few MiB of static busybox, and a push needs every blob anyway.

use std::{collections::BTreeMap, path::Path};

use crate::text::quoted;

/// One image of a layout: its manifest and the blobs it names.
#[derive(Debug)]
pub struct LayoutImage {
    pub manifest_media_type: String,
    pub manifest: Vec<u8>,
    /// `sha256:<hex>` of [`Self::manifest`].
    pub manifest_digest: String,
    /// `(digest, bytes)` of the config and each layer, in manifest order.
    pub blobs: Vec<(String, Vec<u8>)>,
}

#[derive(Debug, thiserror::Error)]
pub enum LayoutError {
    #[error("reading image archive {path}: {source} (ci/setup.sh builds it)")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("image archive {path} is not an OCI image layout: {why}")]
    Format { path: String, why: String },
}

impl LayoutImage {
    /// This image with one more layer on top: a file `name` of `size`
    /// zero bytes. Its digest is new, so a node that holds the base image
    /// (every node holds the test image) still has a layer to pull: what
    /// makes a pull slow, and a pulled image this registry's own.
    pub fn with_layer(&self, name: &str, size: usize) -> LayoutImage {
        let layer = tar_of_one_file(name, size);
        let layer_digest = sha256(&layer);
        let (config_digest, config) = self.blobs[0].clone();
        let mut config_json: serde_json::Value =
            serde_json::from_slice(&config).unwrap_or_else(|_| serde_json::json!({}));
        match config_json["rootfs"]["diff_ids"].as_array_mut() {
            Some(ids) => ids.push(layer_digest.clone().into()),
            None => {
                config_json["rootfs"] =
                    serde_json::json!({"type": "layers", "diff_ids": [layer_digest]})
            }
        }
        if let Some(h) = config_json["history"].as_array_mut() {
            h.push(serde_json::json!({"created_by": format!("unstuck registry step: {name}")}));
        }
        let config = serde_json::to_vec(&config_json).expect("json");
        let config_digest_new = sha256(&config);
        let mut manifest: serde_json::Value =
            serde_json::from_slice(&self.manifest).unwrap_or_else(|_| serde_json::json!({}));
        manifest["config"]["digest"] = config_digest_new.clone().into();
        manifest["config"]["size"] = config.len().into();
        if let Some(layers) = manifest["layers"].as_array_mut() {
            layers.push(serde_json::json!({
                "mediaType": "application/vnd.oci.image.layer.v1.tar",
                "digest": layer_digest,
                "size": layer.len(),
            }));
        }
        let manifest = serde_json::to_vec(&manifest).expect("json");
        let mut blobs: Vec<(String, Vec<u8>)> = self
            .blobs
            .iter()
            .skip(1)
            .filter(|(d, _)| *d != config_digest)
            .cloned()
            .collect();
        blobs.insert(0, (config_digest_new, config));
        blobs.push((layer_digest, layer));
        LayoutImage {
            manifest_media_type: self.manifest_media_type.clone(),
            manifest_digest: sha256(&manifest),
            manifest,
            blobs,
        }
    }
}

/// `sha256:<hex>`.
fn sha256(bytes: &[u8]) -> String {
    let d = ring::digest::digest(&ring::digest::SHA256, bytes);
    let hex: String = d.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// A ustar archive of one regular file `name` holding `size` zero bytes.
fn tar_of_one_file(name: &str, size: usize) -> Vec<u8> {
    let mut h = [0u8; 512];
    let put = |h: &mut [u8; 512], at: usize, text: &str| {
        h[at..at + text.len()].copy_from_slice(text.as_bytes());
    };
    put(&mut h, 0, &name[..name.len().min(99)]);
    put(&mut h, 100, "0000644");
    put(&mut h, 108, "0000000");
    put(&mut h, 116, "0000000");
    put(&mut h, 124, &format!("{size:011o}"));
    put(&mut h, 136, "00000000000");
    h[156] = b'0';
    put(&mut h, 257, "ustar");
    put(&mut h, 263, "00");
    // The checksum is taken with its own field as spaces.
    h[148..156].fill(b' ');
    let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
    put(&mut h, 148, &format!("{sum:06o}\0 "));
    let mut out = h.to_vec();
    out.resize(512 + size.div_ceil(512) * 512 + 1024, 0);
    out
}

/// The first image of the layout in the tar at `path`.
pub fn read(path: &Path) -> Result<LayoutImage, LayoutError> {
    let shown = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|source| LayoutError::Read {
        path: shown.clone(),
        source,
    })?;
    let bad = |why: String| LayoutError::Format {
        path: shown.clone(),
        why,
    };
    let files = untar(&bytes).map_err(&bad)?;
    let index: serde_json::Value = files
        .get("index.json")
        .ok_or_else(|| bad("no index.json".into()))
        .and_then(|b| serde_json::from_slice(b).map_err(|e| bad(format!("index.json: {e}"))))?;
    let blob = |digest: &str| -> Result<Vec<u8>, LayoutError> {
        let hex = digest.strip_prefix("sha256:").ok_or_else(|| {
            bad(format!(
                "digest {digest} is not sha256",
                digest = quoted(digest)
            ))
        })?;
        files
            .get(&format!("blobs/sha256/{hex}"))
            .cloned()
            .ok_or_else(|| bad(format!("blob {digest} is missing")))
    };
    let first = &index["manifests"][0];
    let manifest_digest = first["digest"]
        .as_str()
        .ok_or_else(|| bad("index.json names no manifest".into()))?
        .to_string();
    let manifest = blob(&manifest_digest)?;
    let parsed: serde_json::Value =
        serde_json::from_slice(&manifest).map_err(|e| bad(format!("manifest: {e}")))?;
    let mut blobs = Vec::new();
    for d in
        std::iter::once(&parsed["config"]).chain(parsed["layers"].as_array().into_iter().flatten())
    {
        let digest = d["digest"]
            .as_str()
            .ok_or_else(|| bad("a manifest entry has no digest".into()))?;
        blobs.push((digest.to_string(), blob(digest)?));
    }
    Ok(LayoutImage {
        manifest_media_type: first["mediaType"]
            .as_str()
            .or(parsed["mediaType"].as_str())
            .unwrap_or("application/vnd.oci.image.manifest.v1+json")
            .to_string(),
        manifest,
        manifest_digest,
        blobs,
    })
}

/// The regular files of a ustar archive, by path without a leading `./`.
fn untar(bytes: &[u8]) -> Result<BTreeMap<String, Vec<u8>>, String> {
    let mut files = BTreeMap::new();
    let mut at = 0;
    while at + 512 <= bytes.len() {
        let header = &bytes[at..at + 512];
        if header.iter().all(|&b| b == 0) {
            break;
        }
        let text = |range: std::ops::Range<usize>| {
            let field = &header[range];
            let end = field.iter().position(|&b| b == 0).unwrap_or(field.len());
            String::from_utf8_lossy(&field[..end]).into_owned()
        };
        let size_text = text(124..136);
        let size = usize::from_str_radix(size_text.trim(), 8).map_err(|_| {
            format!(
                "entry at byte {at} has size {size_text}",
                size_text = quoted(&size_text)
            )
        })?;
        let prefix = text(345..500);
        let name = match prefix.is_empty() {
            true => text(0..100),
            false => format!("{prefix}/{}", text(0..100)),
        };
        let data_at = at + 512;
        if data_at + size > bytes.len() {
            return Err(format!(
                "entry {name} runs past the end",
                name = quoted(&name)
            ));
        }
        // '0' or NUL: a regular file; directories and links are not needed.
        if matches!(header[156], b'0' | 0) {
            let name = name.trim_start_matches("./").to_string();
            files.insert(name, bytes[data_at..data_at + size].to_vec());
        }
        at = data_at + size.div_ceil(512) * 512;
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A one-entry ustar archive, as tar(1) writes it.
    fn tar_of(name: &str, data: &[u8]) -> Vec<u8> {
        let mut h = vec![0u8; 512];
        h[..name.len()].copy_from_slice(name.as_bytes());
        let size = format!("{:011o}", data.len());
        h[124..135].copy_from_slice(size.as_bytes());
        h[156] = b'0';
        let mut out = h;
        out.extend_from_slice(data);
        out.resize(512 + data.len().div_ceil(512) * 512 + 1024, 0);
        out
    }

    #[test]
    fn a_layer_on_top_is_a_valid_tar_named_in_config_and_manifest() {
        let base = LayoutImage {
            manifest_media_type: "application/vnd.oci.image.manifest.v1+json".into(),
            manifest: br#"{"schemaVersion":2,"config":{"digest":"sha256:c","size":2},"layers":[{"digest":"sha256:l","size":1}]}"#.to_vec(),
            manifest_digest: "sha256:m".into(),
            blobs: vec![
                ("sha256:c".into(), br#"{"rootfs":{"type":"layers","diff_ids":["sha256:l"]}}"#.to_vec()),
                ("sha256:l".into(), b"x".to_vec()),
            ],
        };
        let top = base.with_layer("unstuck-run1-shop", 1000);
        let files = untar(&top.blobs[2].1).unwrap();
        assert_eq!(files["unstuck-run1-shop"].len(), 1000);
        assert_eq!(top.blobs[2].0, sha256(&top.blobs[2].1));
        let config: serde_json::Value = serde_json::from_slice(&top.blobs[0].1).unwrap();
        assert_eq!(config["rootfs"]["diff_ids"][1], top.blobs[2].0.as_str());
        let manifest: serde_json::Value = serde_json::from_slice(&top.manifest).unwrap();
        assert_eq!(manifest["config"]["digest"], top.blobs[0].0.as_str());
        assert_eq!(manifest["layers"][1]["digest"], top.blobs[2].0.as_str());
        assert_eq!(top.manifest_digest, sha256(&top.manifest));
        assert_ne!(top.manifest_digest, base.manifest_digest);
        // Another name, another layer: a node holding one lacks the other.
        assert_ne!(
            base.with_layer("unstuck-run2-shop", 1000).blobs[2].0,
            top.blobs[2].0
        );
    }

    #[test]
    fn untar_reads_regular_files_and_strips_the_dot() {
        let files = untar(&tar_of("./index.json", b"{}")).unwrap();
        assert_eq!(files.get("index.json").map(Vec::as_slice), Some(&b"{}"[..]));
        let mut cut = tar_of("./blobs/sha256/ab", &[7u8; 700]);
        cut.truncate(900);
        assert!(untar(&cut).unwrap_err().contains("runs past the end"));
    }
}
