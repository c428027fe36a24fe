// Stable colours for event names: the same name gets the same colour in every view,
// every session and every browser, because the colour is a pure hash of the name.

const cache = new Map();

/** FNV-1a over the UTF-16 code units of `text`, as an unsigned 32-bit integer. */
export function hashName(text) {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return hash >>> 0;
}

/**
 * The fill colour of events called `name`: a hue from the hash, saturation and
 * lightness in a band that keeps dark text readable on it.
 */
export function colorForName(name) {
  let color = cache.get(name);
  if (color === undefined) {
    const hash = hashName(name);
    const hue = hash % 360;
    const saturation = 45 + ((hash >>> 9) % 25);
    const lightness = 62 + ((hash >>> 17) % 14);
    color = `hsl(${hue} ${saturation}% ${lightness}%)`;
    if (cache.size > 20000) cache.clear();
    cache.set(name, color);
  }
  return color;
}
