//! A strict YAML reader for the configuration file: the events of `saphyr-parser` (a maintained,
//! pure-Rust YAML 1.2 parser) folded into a small tree whose every node knows its line.
//!
//! Stricter than YAML itself, because a configuration file that means two things is a bug: a key
//! repeated in one mapping, an alias (`*name`), a tag (`!!str`), a non-scalar key and a second
//! document are errors naming the line.

use saphyr_parser::{Event, Parser, ScalarStyle, Span};

/// One node of the tree, with the 1-based line where it starts.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub line: usize,
    pub value: NodeValue,
}

#[derive(Debug, Clone, PartialEq)]
pub enum NodeValue {
    /// A scalar: its text, and whether it was quoted (`"..."`, `'...'`, or a block scalar).
    Scalar {
        text: String,
        quoted: bool,
    },
    Seq(Vec<Node>),
    /// Keys in file order, each with its own line.
    Map(Vec<(String, usize, Node)>),
}

/// Why a file is not acceptable YAML for airlock.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct YamlError {
    pub line: usize,
    pub message: String,
}

fn err(line: usize, message: impl Into<String>) -> YamlError {
    YamlError {
        line,
        message: message.into(),
    }
}

enum Open {
    Seq(usize, Vec<Node>),
    Map(usize, Vec<(String, usize, Node)>, Option<(String, usize)>),
}

/// Parses `text` into one tree; an empty file (or one holding only comments) is `None`.
pub fn parse(text: &str) -> Result<Option<Node>, YamlError> {
    let mut stack: Vec<Open> = Vec::new();
    let mut root: Option<Node> = None;
    let mut documents = 0usize;
    for event in Parser::new_from_str(text) {
        let (event, span) = event.map_err(|e| err(e.marker().line(), e.info().to_string()))?;
        let line = span.start.line();
        let node = match event {
            Event::DocumentStart(_) => {
                documents += 1;
                if documents > 1 {
                    return Err(err(
                        line,
                        "a second YAML document; keep one document per file",
                    ));
                }
                continue;
            }
            Event::Alias(_) => return Err(err(line, "aliases (*name) are not allowed here")),
            Event::Scalar(text, style, _, tag) => {
                if tag.is_some() {
                    return Err(err(line, "tags (!...) are not allowed here"));
                }
                let quoted = !matches!(style, ScalarStyle::Plain);
                Node {
                    line,
                    value: NodeValue::Scalar {
                        text: text.into_owned(),
                        quoted,
                    },
                }
            }
            Event::SequenceStart(_, tag) | Event::MappingStart(_, tag) if tag.is_some() => {
                return Err(err(line, "tags (!...) are not allowed here"));
            }
            Event::SequenceStart(..) => {
                stack.push(Open::Seq(line, Vec::new()));
                continue;
            }
            Event::MappingStart(..) => {
                stack.push(Open::Map(line, Vec::new(), None));
                continue;
            }
            Event::SequenceEnd | Event::MappingEnd => match stack.pop() {
                Some(Open::Seq(l, items)) => Node {
                    line: l,
                    value: NodeValue::Seq(items),
                },
                Some(Open::Map(l, entries, _)) => Node {
                    line: l,
                    value: NodeValue::Map(entries),
                },
                None => return Err(err(line, "unbalanced collection end")),
            },
            _ => continue,
        };
        place(&mut stack, &mut root, node, span)?;
    }
    Ok(root)
}

/// Puts a finished node into its parent: a sequence item, a mapping key, or a mapping value.
fn place(
    stack: &mut [Open],
    root: &mut Option<Node>,
    node: Node,
    span: Span,
) -> Result<(), YamlError> {
    match stack.last_mut() {
        None => *root = Some(node),
        Some(Open::Seq(_, items)) => items.push(node),
        Some(Open::Map(_, entries, pending)) => match pending.take() {
            Some((key, key_line)) => entries.push((key, key_line, node)),
            None => {
                let NodeValue::Scalar { text, .. } = node.value else {
                    return Err(err(
                        span.start.line(),
                        "mapping keys must be plain text, not lists or mappings",
                    ));
                };
                if let Some((_, first, _)) = entries.iter().find(|(k, _, _)| *k == text) {
                    return Err(err(
                        node.line,
                        format!("key {text:?} repeats the key of line {first}; give each key once"),
                    ));
                }
                *pending = Some((text, node.line));
            }
        },
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map_keys(n: &Node) -> Vec<(String, usize)> {
        match &n.value {
            NodeValue::Map(e) => e.iter().map(|(k, l, _)| (k.clone(), *l)).collect(),
            _ => panic!("not a map"),
        }
    }

    #[test]
    fn nested_mappings_keep_lines() {
        let t = "# comment\nscheduler:\n  hlc:\n    nodeId: \"a\"\n    maxClockSkew: 00:00:05\n";
        let root = parse(t).unwrap().unwrap();
        assert_eq!(map_keys(&root), vec![("scheduler".to_string(), 2)]);
        let NodeValue::Map(e) = &root.value else {
            panic!()
        };
        let NodeValue::Map(h) = &e[0].2.value else {
            panic!()
        };
        assert_eq!(
            map_keys(&h[0].2),
            vec![("nodeId".into(), 4), ("maxClockSkew".into(), 5)]
        );
        let NodeValue::Map(leaf) = &h[0].2.value else {
            panic!()
        };
        assert_eq!(
            leaf[1].2.value,
            NodeValue::Scalar {
                text: "00:00:05".into(),
                quoted: false
            }
        );
        assert_eq!(
            leaf[0].2.value,
            NodeValue::Scalar {
                text: "a".into(),
                quoted: true
            }
        );
    }

    #[test]
    fn duplicate_keys_are_refused_with_both_lines() {
        let e = parse("a: 1\nb: 2\na: 3\n").unwrap_err();
        assert_eq!(e.line, 3);
        assert!(e.message.contains("line 1"), "{e}");
        // Also inside nested mappings and flow mappings.
        assert_eq!(parse("x:\n  y: 1\n  y: 2\n").unwrap_err().line, 3);
        assert!(parse("x: {a: 1, a: 2}\n").is_err());
    }

    #[test]
    fn aliases_tags_and_second_documents_are_refused() {
        assert!(parse("a: &x 1\nb: *x\n")
            .unwrap_err()
            .message
            .contains("alias"));
        assert!(parse("a: !!str 1\n").unwrap_err().message.contains("tag"));
        assert!(parse("a: 1\n---\nb: 2\n")
            .unwrap_err()
            .message
            .contains("second"));
        assert!(parse("? [a]\n: 1\n").unwrap_err().message.contains("keys"));
    }

    #[test]
    fn syntax_errors_name_the_line_and_empty_is_none() {
        let e = parse("a: 1\nb: [1, 2\n").unwrap_err();
        assert!(e.line >= 2, "{e}");
        assert_eq!(parse("").unwrap(), None);
        assert_eq!(parse("# only a comment\n").unwrap(), None);
        let seq = parse("- a\n- b\n").unwrap().unwrap();
        assert!(matches!(seq.value, NodeValue::Seq(ref v) if v.len() == 2));
    }
}
