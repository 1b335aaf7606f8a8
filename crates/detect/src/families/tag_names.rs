//! Tag names that are never a tool's element: HTML's, and the tags prompts, models and
//! other formats structure text with. The markup net (`markup`) and `cline_xml`
//! (`xml_tool`) both ask; this leaf holds the lists so that neither imports the other's.
//!
//! May depend on: nothing of the crate.

/// HTML elements: a tag of one of these names is an answer's markup, never a call, so it
/// does not wake the reader. Sorted (checked by a test): looked up by binary search.
const HTML: &[&str] = &[
    "a",
    "abbr",
    "address",
    "article",
    "aside",
    "audio",
    "b",
    "blockquote",
    "body",
    "br",
    "button",
    "canvas",
    "caption",
    "center",
    "cite",
    "code",
    "col",
    "colgroup",
    "datalist",
    "dd",
    "del",
    "details",
    "dialog",
    "div",
    "dl",
    "dt",
    "em",
    "embed",
    "fieldset",
    "figcaption",
    "figure",
    "footer",
    "form",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "head",
    "header",
    "hr",
    "html",
    "i",
    "iframe",
    "img",
    "input",
    "ins",
    "kbd",
    "label",
    "legend",
    "li",
    "link",
    "main",
    "mark",
    "meta",
    "meter",
    "nav",
    "noscript",
    "object",
    "ol",
    "optgroup",
    "option",
    "output",
    "p",
    "param",
    "picture",
    "pre",
    "progress",
    "q",
    "s",
    "samp",
    "script",
    "section",
    "select",
    "slot",
    "small",
    "source",
    "span",
    "strong",
    "style",
    "sub",
    "summary",
    "sup",
    "svg",
    "table",
    "tbody",
    "td",
    "template",
    "textarea",
    "tfoot",
    "th",
    "thead",
    "time",
    "title",
    "tr",
    "track",
    "u",
    "ul",
    "var",
    "video",
    "wbr",
];

pub(crate) fn is_html(name: &str) -> bool {
    HTML.binary_search(&name).is_ok()
}

/// Tags that are markup of their own besides HTML's ([`HTML`]): the tags
/// prompts and models structure text with, and other formats' wrappers. An element of
/// either kind of name is never a tool's call. Sorted (checked by a test): looked up by
/// binary search.
const NOT_TOOLS: &[&str] = &[
    "analysis",
    "answer",
    "context",
    "data",
    "document",
    "example",
    "examples",
    "function_calls",
    "instructions",
    "invoke",
    "item",
    "parameter",
    "reflection",
    "response",
    "result",
    "root",
    "scratchpad",
    "think",
    "thinking",
    "thought",
    "tool_call",
    "tool_calls",
    "tool_response",
    "tool_result",
    "tools",
    "xml",
];

/// Whether an element of this name is markup of its own, never a tool's call.
pub(crate) fn not_a_tool(name: &str) -> bool {
    is_html(name) || NOT_TOOLS.binary_search(&name).is_ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_lists_are_sorted_for_binary_search() {
        assert!(super::HTML.windows(2).all(|w| w[0] < w[1]));
        assert!(super::NOT_TOOLS.windows(2).all(|w| w[0] < w[1]));
    }
}
