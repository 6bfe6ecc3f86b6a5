//! An ACP prompt (content blocks) as the text droid gets: the text blocks as written, then the
//! context the client attached — embedded resources, resource links and `@file` mentions —
//! each file read from inside the session's directory only, bounded.
//!
//! - `text`: as is; a word `@path` (or `@"path with spaces"`) naming a file inside the
//!   directory adds that file;
//! - `resource_link` with a `file://` URI inside the directory: the file is added; outside it
//!   (or another scheme), the link is named but nothing is read;
//! - `resource` (embedded): its text as the client sent it (a blob is named, not decoded);
//! - `image`: passed to droid as it is (base64, PNG, JPEG, GIF or WebP; at most
//!   [`MAX_IMAGES`], each at most [`IMAGE_MAX_BYTES`] of base64), when the session's model takes
//!   images (checked by the session);
//! - `audio`: refused (the capabilities say so), naming the block.

use std::path::{Path, PathBuf};

use droid_exec::session::PromptImage;
use serde_json::Value;

use crate::jsonrpc::RpcError;

/// A file attached as context is cut at this size.
pub const FILE_MAX_BYTES: usize = 100 * 1024;
/// At most this many files are attached to one prompt.
pub const MAX_FILES: usize = 32;
/// A prompt's text (all blocks) may be at most this long.
pub const PROMPT_MAX_BYTES: usize = 1024 * 1024;
/// Images one prompt may carry.
pub const MAX_IMAGES: usize = 8;
/// The largest image, as base64 (about 6 MiB of image).
pub const IMAGE_MAX_BYTES: usize = 8 * 1024 * 1024;
/// The image types droid takes.
pub const IMAGE_TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/gif", "image/webp"];

/// The prompt's text for droid, and the user's own text (for the session's title).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prompt {
    /// What droid gets.
    pub text: String,
    /// Context files attached (paths relative to the directory), for the logs.
    pub attached: Vec<String>,
    /// The images, in order.
    pub images: Vec<PromptImage>,
    /// The first text block as the user wrote it (a slash command is read from it).
    pub first_text: String,
}

/// An `image` block as droid takes it, or why not.
fn image(i: usize, b: &Value) -> Result<PromptImage, RpcError> {
    let mime = b.get("mimeType").and_then(Value::as_str).ok_or_else(|| {
        RpcError::invalid_params(format!("prompt[{i}]: an image block needs \"mimeType\""))
    })?;
    if !IMAGE_TYPES.contains(&mime) {
        return Err(RpcError::invalid_params(format!(
            "prompt[{i}]: image type {mime:?} is not one droid takes ({})",
            IMAGE_TYPES.join(", ")
        )));
    }
    let data = b.get("data").and_then(Value::as_str).ok_or_else(|| {
        RpcError::invalid_params(format!(
            "prompt[{i}]: an image block needs \"data\" (base64)"
        ))
    })?;
    if data.len() > IMAGE_MAX_BYTES {
        return Err(RpcError::invalid_params(format!(
            "prompt[{i}]: the image is {} bytes of base64; at most {IMAGE_MAX_BYTES}",
            data.len()
        )));
    }
    let base64 = !data.is_empty()
        && data.len() % 4 == 0
        && data
            .trim_end_matches('=')
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'+' || c == b'/')
        && data.len() - data.trim_end_matches('=').len() <= 2;
    if !base64 {
        return Err(RpcError::invalid_params(format!(
            "prompt[{i}]: the image's data is not base64"
        )));
    }
    Ok(PromptImage {
        media_type: mime.to_owned(),
        data: data.to_owned(),
    })
}

/// Build droid's prompt from the `prompt` array of `session/prompt`.
///
/// # Errors
/// `-32602` naming the block: not an array, an unknown or unsupported block type, a block
/// without its required fields, or a prompt over [`PROMPT_MAX_BYTES`].
pub fn build(blocks: &Value, root: &Path) -> Result<Prompt, RpcError> {
    let blocks = blocks
        .as_array()
        .ok_or_else(|| RpcError::invalid_params("prompt must be an array of content blocks"))?;
    if blocks.is_empty() {
        return Err(RpcError::invalid_params("prompt is empty"));
    }
    let mut text = String::new();
    let mut first_text: Option<String> = None;
    let mut images: Vec<PromptImage> = Vec::new();
    let mut context: Vec<(String, String)> = Vec::new();
    let mut attached: Vec<String> = Vec::new();
    let mut attach = |path: &Path, why: &str, context: &mut Vec<(String, String)>| {
        if attached.len() >= MAX_FILES {
            return;
        }
        if let Some((rel, content)) = read_inside(root, path)
            && !attached.contains(&rel)
        {
            attached.push(rel.clone());
            context.push((format!("{why} {rel}"), content));
        }
    };
    for (i, b) in blocks.iter().enumerate() {
        let kind = b.get("type").and_then(Value::as_str).unwrap_or("");
        match kind {
            "text" => {
                let t = b.get("text").and_then(Value::as_str).ok_or_else(|| {
                    RpcError::invalid_params(format!("prompt[{i}]: a text block needs \"text\""))
                })?;
                if first_text.is_none() {
                    first_text = Some(t.to_owned());
                }
                if !text.is_empty() {
                    text.push('\n');
                }
                text.push_str(t);
                for m in mentions(t) {
                    attach(&root.join(&m), "file mentioned as", &mut context);
                }
            }
            "resource_link" => {
                let uri = b.get("uri").and_then(Value::as_str).ok_or_else(|| {
                    RpcError::invalid_params(format!("prompt[{i}]: a resource_link needs \"uri\""))
                })?;
                match file_path(uri) {
                    Some(p) if inside(root, &p).is_some() => {
                        attach(&p, "linked file", &mut context);
                    }
                    _ => context.push((
                        format!("link (not read: outside the session's directory) {uri}"),
                        String::new(),
                    )),
                }
            }
            "resource" => {
                let r = b.get("resource").ok_or_else(|| {
                    RpcError::invalid_params(format!(
                        "prompt[{i}]: a resource block needs \"resource\""
                    ))
                })?;
                let uri = r.get("uri").and_then(Value::as_str).unwrap_or("(no uri)");
                match r.get("text").and_then(Value::as_str) {
                    Some(t) => context.push((format!("embedded {uri}"), cut(t))),
                    None => {
                        context.push((format!("embedded binary {uri} (not shown)"), String::new()))
                    }
                }
            }
            "image" => {
                if images.len() >= MAX_IMAGES {
                    return Err(RpcError::invalid_params(format!(
                        "prompt[{i}]: more than {MAX_IMAGES} images in one prompt"
                    )));
                }
                images.push(image(i, b)?);
            }
            "audio" => {
                return Err(RpcError::invalid_params(format!(
                    "prompt[{i}]: audio content is not supported (promptCapabilities.audio is false)"
                )));
            }
            other => {
                return Err(RpcError::invalid_params(format!(
                    "prompt[{i}]: unknown content block type {other:?}"
                )));
            }
        }
    }
    for (title, content) in &context {
        text.push_str("\n\n");
        if content.is_empty() {
            text.push_str(&format!("[{title}]"));
        } else {
            text.push_str(&format!(
                "<context source=\"{title}\">\n{content}\n</context>"
            ));
        }
    }
    if text.len() > PROMPT_MAX_BYTES {
        return Err(RpcError::invalid_params(format!(
            "the prompt is {} bytes with its context; at most {PROMPT_MAX_BYTES}",
            text.len()
        )));
    }
    Ok(Prompt {
        text,
        attached,
        images,
        first_text: first_text.unwrap_or_default(),
    })
}

/// The `@path` mentions of a text: `@` at the start of a word, then a path up to whitespace
/// (`@"…"` for paths with spaces); trailing punctuation is not part of it.
fn mentions(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while let Some(at) = text[i..].find('@') {
        let start = i + at;
        i = start + 1;
        if start > 0 && !bytes[start - 1].is_ascii_whitespace() && bytes[start - 1] != b'(' {
            continue;
        }
        let rest = &text[start + 1..];
        let path = if let Some(q) = rest.strip_prefix('"') {
            q.split('"').next().unwrap_or("")
        } else {
            let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
            rest[..end].trim_end_matches(['.', ',', ':', ';', ')', '!', '?'])
        };
        if !path.is_empty() && path.len() < 4096 {
            out.push(path.to_owned());
        }
    }
    out
}

fn file_path(uri: &str) -> Option<PathBuf> {
    let p = uri.strip_prefix("file://")?;
    // percent-decoding of the common cases (spaces); anything else is used as written
    Some(PathBuf::from(p.replace("%20", " ")))
}

/// `path` resolved, when it lies inside `root` (already canonical): its path relative to root.
fn inside(root: &Path, path: &Path) -> Option<String> {
    let real = std::fs::canonicalize(path).ok()?;
    let rel = real.strip_prefix(root).ok()?;
    Some(rel.display().to_string())
}

fn read_inside(root: &Path, path: &Path) -> Option<(String, String)> {
    use std::io::Read as _;
    let rel = inside(root, path)?;
    let real = root.join(&rel);
    let meta = std::fs::metadata(&real).ok()?;
    if !meta.is_file() {
        return None;
    }
    let mut buf = Vec::new();
    std::fs::File::open(&real)
        .ok()?
        .take(FILE_MAX_BYTES as u64 + 1)
        .read_to_end(&mut buf)
        .ok()?;
    let text = String::from_utf8_lossy(&buf).into_owned();
    Some((rel, cut(&text)))
}

fn cut(text: &str) -> String {
    if text.len() <= FILE_MAX_BYTES {
        return text.to_owned();
    }
    let mut end = FILE_MAX_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}\n[… cut at {FILE_MAX_BYTES} bytes]", &text[..end])
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    #[test]
    fn mentions_are_words_starting_with_at() {
        assert_eq!(
            mentions("fix @src/a.rs, then @\"b c.txt\" and mail x@y.z (@d)"),
            vec!["src/a.rs", "b c.txt", "d"]
        );
    }

    #[test]
    fn context_is_read_only_inside_the_directory() {
        let dir = std::env::temp_dir().join(format!("acp-prompt-{}", std::process::id()));
        let root = dir.join("repo");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(root.join("a.txt"), "alpha\n").unwrap();
        std::fs::write(dir.join("secret.txt"), "no\n").unwrap();
        let root = std::fs::canonicalize(&root).unwrap();
        let p = build(
            &json!([
                {"type": "text", "text": "look at @a.txt and @../secret.txt"},
                {"type": "resource_link", "name": "s", "uri": format!("file://{}/secret.txt", dir.display())},
                {"type": "resource", "resource": {"uri": "file:///x/e.rs", "text": "fn e() {}"}}
            ]),
            &root,
        )
        .unwrap();
        assert_eq!(p.attached, vec!["a.txt"]);
        assert!(p.text.contains("alpha"));
        assert!(p.text.contains("fn e() {}"));
        assert!(!p.text.contains("no\n"), "{}", p.text);
        assert!(p.text.contains("not read: outside"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn bad_blocks_are_named() {
        let root = Path::new("/");
        assert!(
            build(&json!("x"), root)
                .unwrap_err()
                .message
                .contains("array")
        );
        assert!(
            build(&json!([]), root)
                .unwrap_err()
                .message
                .contains("empty")
        );
        let e = build(
            &json!([{"type": "image", "data": "", "mimeType": "image/png"}]),
            root,
        )
        .unwrap_err();
        assert!(
            e.message
                .contains("prompt[0]: the image's data is not base64"),
            "{}",
            e.message
        );
        let e = build(
            &json!([{"type": "image", "data": "AAAA", "mimeType": "image/tiff"}]),
            root,
        )
        .unwrap_err();
        assert!(e.message.contains("image/tiff"), "{}", e.message);
        let e = build(
            &json!([{"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}]),
            root,
        )
        .unwrap_err();
        assert!(e.message.contains("prompt[0]: audio"), "{}", e.message);
        let p = build(
            &json!([{"type": "text", "text": "what is this?"}, {"type": "image", "data": "iVBORw0K", "mimeType": "image/png"}]),
            root,
        )
        .unwrap();
        assert_eq!(
            p.images,
            vec![PromptImage {
                media_type: "image/png".into(),
                data: "iVBORw0K".into()
            }]
        );
        assert_eq!(p.first_text, "what is this?");
        let e = build(&json!([{"type": "video"}]), root).unwrap_err();
        assert!(e.message.contains("\"video\""));
        let e = build(&json!([{"type": "text"}]), root).unwrap_err();
        assert!(e.message.contains("needs \"text\""));
    }
}
