// Shared by the report's pages and the sentence browser: a DOM element from a tag, its
// attributes and its children (strings become text nodes).
"use strict";
function element(tag, attributes, children) {
  const node = document.createElement(tag);
  Object.entries(attributes || {}).forEach(([key, value]) => node.setAttribute(key, value));
  (children || []).forEach((child) =>
    node.append(typeof child === "string" ? document.createTextNode(child) : child));
  return node;
}
