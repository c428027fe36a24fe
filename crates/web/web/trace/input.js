// Mouse and keyboard for the trace viewer, in the conventions of chrome://tracing and
// Perfetto: W/S zoom, A/D pan (a press moves one step, a held key moves smoothly every
// frame), wheel zooms around the pointer, drag pans, shift-drag
// marks a range on the tracks it crosses (from the ruler: on every track), dragging a
// track's name moves the track within its section. Handlers only translate input into
// the viewer's methods.

/** Pixels a press may move and still count as a click. */
const CLICK_SLOP_PX = 4;
/** Zoom per W/S press (autorepeat while held). */
const KEY_ZOOM = 0.8;
/** Pan per A/D press, as a fraction of the window. */
const KEY_PAN = 0.12;
/** A W/S/A/D key held this long (ms) moves the view continuously, every frame, instead of by key repeats. */
const HOLD_MS = 200;
/** While held: one press's zoom or pan every this many ms, spread over the frames. */
const HELD_STEP_MS = 90;

/** What holding each movement key does, per press: [zoom factor or null, pan fraction or null]. */
const MOVES = {
  w: [KEY_ZOOM, null],
  s: [1 / KEY_ZOOM, null],
  a: [null, -KEY_PAN],
  d: [null, KEY_PAN],
};

/** Wires `viewer`'s scroller and the document's keys; returns a function that unwires them. */
export function attachInput(viewer) {
  const target = viewer.scroller;
  let drag = null;
  let lastX = null;
  // Movement keys held down (key → when pressed) and the animation frame that moves the view.
  const held = new Map();
  let frame = 0;
  let lastFrame = 0;

  const animate = (now) => {
    frame = 0;
    if (held.size === 0) return;
    const dt = Math.min(100, now - lastFrame);
    lastFrame = now;
    for (const [key, since] of held) {
      if (now - since < HOLD_MS) continue;
      const [zoom, pan] = MOVES[key];
      const share = dt / HELD_STEP_MS;
      if (zoom !== null) viewer.zoom(zoom ** share, viewer.anchorAt(lastX));
      if (pan !== null) viewer.pan(pan * share);
    }
    frame = requestAnimationFrame(animate);
  };
  const hold = (key) => {
    held.set(key, performance.now());
    if (!frame) {
      lastFrame = performance.now();
      frame = requestAnimationFrame(animate);
    }
  };
  const release = (key) => {
    held.delete(key);
    if (held.size === 0 && frame) {
      cancelAnimationFrame(frame);
      frame = 0;
    }
  };
  const releaseAll = () => [...held.keys()].forEach(release);

  const position = (event) => {
    const rect = viewer.stage.getBoundingClientRect();
    return { x: event.clientX - rect.left, y: event.clientY - rect.top };
  };

  const onPointerDown = (event) => {
    if (event.button !== 0) return;
    const { x, y } = position(event);
    if (x >= viewer.width()) return; // the scrollbar
    target.setPointerCapture(event.pointerId);
    target.focus({ preventScroll: true });
    drag = {
      x,
      y,
      window: viewer.window,
      scrollTop: target.scrollTop,
      marking: event.shiftKey && x >= viewer.labelWidth(),
      startPs: viewer.timeAt(x),
      moved: false,
      // A track's name: the drag moves the track.
      track: !event.shiftKey && x < viewer.labelWidth() ? viewer.movableTrackAt(y) : null,
    };
    viewer.hideTooltip();
    event.preventDefault();
  };

  const onPointerMove = (event) => {
    const { x, y } = position(event);
    lastX = x;
    if (!drag) {
      viewer.hoverAt(x, y);
      return;
    }
    const dx = x - drag.x;
    const dy = y - drag.y;
    if (!drag.moved && Math.abs(dx) + Math.abs(dy) < CLICK_SLOP_PX) return;
    drag.moved = true;
    if (drag.track) {
      target.style.cursor = 'grabbing';
      const over = viewer.movableTrackAt(y);
      if (over) viewer.moveTrack(drag.track.track.id, over.track.id);
      return;
    }
    if (drag.marking) {
      const ps = viewer.timeAt(x);
      const tracks = viewer.tracksBetweenY(drag.y, y);
      viewer.setMark({ startPs: Math.min(drag.startPs, ps), endPs: Math.max(drag.startPs, ps), tracks });
      return;
    }
    const span = drag.window.endPs - drag.window.startPs;
    const shift = (-dx / Math.max(1, viewer.width() - viewer.labelWidth())) * span;
    viewer.setWindow({ startPs: drag.window.startPs + shift, endPs: drag.window.endPs + shift });
    target.scrollTop = drag.scrollTop - dy;
  };

  const onPointerUp = (event) => {
    if (!drag) return;
    const { x, y } = position(event);
    const wasClick = !drag.moved;
    if (drag.track && drag.moved) {
      target.style.cursor = '';
      viewer.commitTrackOrder();
    }
    drag = null;
    if (target.hasPointerCapture(event.pointerId)) target.releasePointerCapture(event.pointerId);
    if (wasClick) viewer.clickAt(x, y);
  };

  const onPointerLeave = () => {
    lastX = null;
    if (!drag) viewer.hideTooltip();
  };

  const onWheel = (event) => {
    const { x } = position(event);
    if (!event.ctrlKey && x < viewer.labelWidth()) return; // native vertical scroll over the names
    event.preventDefault();
    const scale = event.deltaMode === 1 ? 16 : event.deltaMode === 2 ? viewer.height() : 1;
    let dx = event.deltaX * scale;
    let dy = event.deltaY * scale;
    if (event.shiftKey && dx === 0) {
      dx = dy;
      dy = 0;
    }
    if (Math.abs(dx) > Math.abs(dy)) {
      viewer.pan(dx / Math.max(1, viewer.width() - viewer.labelWidth()));
    } else if (dy !== 0) {
      const factor = Math.exp(Math.max(-1, Math.min(1, dy * 0.002)));
      viewer.zoom(factor, viewer.anchorAt(x));
    }
  };

  const onKeyDown = (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey || typing(event.target)) return;
    const anchor = viewer.anchorAt(lastX);
    const move = event.key.toLowerCase();
    if (move in MOVES) {
      // The first press moves one step; holding it then moves continuously (animate).
      event.preventDefault();
      if (event.repeat || held.has(move)) return;
      hold(move);
    }
    switch (event.key) {
      case 'w':
      case 'W':
        viewer.zoom(KEY_ZOOM, anchor);
        break;
      case 's':
      case 'S':
        viewer.zoom(1 / KEY_ZOOM, anchor);
        break;
      case 'a':
      case 'A':
        viewer.pan(-KEY_PAN);
        break;
      case 'd':
      case 'D':
        viewer.pan(KEY_PAN);
        break;
      case '0':
        viewer.resetZoom();
        break;
      case 'f':
      case 'F':
        viewer.fitSelection();
        break;
      case 'm':
      case 'M':
        viewer.markSelection();
        break;
      case 'p':
      case 'P':
        viewer.togglePinSelected();
        break;
      case '?':
        viewer.toggleHelp();
        break;
      case '/':
        viewer.focusSearch();
        break;
      case 'Escape':
        viewer.escape();
        break;
      default:
        return;
    }
    event.preventDefault();
  };

  target.addEventListener('pointerdown', onPointerDown);
  target.addEventListener('pointermove', onPointerMove);
  target.addEventListener('pointerup', onPointerUp);
  target.addEventListener('pointercancel', onPointerUp);
  target.addEventListener('pointerleave', onPointerLeave);
  const onKeyUp = (event) => {
    const move = event.key.toLowerCase();
    if (move in MOVES) release(move);
  };

  target.addEventListener('wheel', onWheel, { passive: false });
  document.addEventListener('keydown', onKeyDown);
  document.addEventListener('keyup', onKeyUp);
  window.addEventListener('blur', releaseAll);
  return () => {
    releaseAll();
    document.removeEventListener('keyup', onKeyUp);
    window.removeEventListener('blur', releaseAll);
    target.removeEventListener('pointerdown', onPointerDown);
    target.removeEventListener('pointermove', onPointerMove);
    target.removeEventListener('pointerup', onPointerUp);
    target.removeEventListener('pointercancel', onPointerUp);
    target.removeEventListener('pointerleave', onPointerLeave);
    target.removeEventListener('wheel', onWheel);
    document.removeEventListener('keydown', onKeyDown);
  };
}

/** True when keys typed at `element` are text for it (inputs, editable content). */
function typing(element) {
  if (!(element instanceof HTMLElement)) return false;
  const tag = element.tagName;
  return tag === 'INPUT' || tag === 'TEXTAREA' || tag === 'SELECT' || element.isContentEditable;
}
