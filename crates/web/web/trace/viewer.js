// The trace viewer: `mount(element, context)` builds it inside `element` for the run
// and host the app shell names and returns `{unmount()}`. It asks /api/trace/meta for
// the sections and tracks, then /api/trace/view for only the visible window and tracks
// (see loader.js), and paints everything on one canvas (draw.js). The viewport and the
// selected event live in the page URL (`start_ps`, `end_ps`, `event`) so a view can be
// shared. Module map: api (HTTP), loader (view requests), store (what arrived), layout
// (rows), viewport (window math), draw (canvas), input (mouse/keys), details, range,
// search, help (panes), pane (the pane under the timeline that holds them), time and
// palette (formatting, colours).

import { TraceApi, isAbort } from './api.js';
import { DetailsPane } from './details.js';
import { h } from '../lib/dom.js';
import { counterKey, drawScene, stripePattern } from './draw.js';
import { helpOverlay } from './help.js';
import { attachInput } from './input.js';
import { LEVEL_HEIGHT, PINNED, RULER_HEIGHT, TRACK_PADDING, buildLayout, labelWidth, rowAt, rowsBetween } from './layout.js';
import { ViewLoader } from './loader.js';
import { BottomPane } from './pane.js';
import { traceProbe } from './probe.js';
import { RangePane } from './range.js';
import { SearchPanel } from './search.js';
import { TrackStore } from './store.js';
import { formatBytes, formatDuration, formatNumber } from '../lib/format.js';
import { formatTime } from './time.js';
import { centerOn, clampWindow, fitRange, fullWindow, panBy, zoomAround } from './viewport.js';

/**
 * Mounts the trace viewer in `element`. `context`: `{run, host, params, setParams}` —
 * the run (name, or an object with `name`), the host, the page's URLSearchParams and a
 * function merging keys into the URL query (null removes a key).
 */
export function mount(element, context) {
  const viewer = new TraceViewer(element, context);
  viewer.start();
  return { unmount: () => viewer.destroy() };
}

/** How long the viewport must rest before it is written to the URL. */
const URL_DELAY_MS = 250;

class TraceViewer {
  constructor(element, context) {
    this.element = element;
    this.context = context;
    const run = context.run !== null && typeof context.run === 'object' ? context.run.name : context.run;
    this.api = new TraceApi(run ?? '', context.host ?? '');
    this.store = new TrackStore();
    this.collapsed = new Set();
    this.meta = null;
    this.trace = { startPs: 0, endPs: 1 };
    this.window = { startPs: 0, endPs: 1 };
    this.layout = buildLayout([], this.collapsed);
    this.selected = null;
    this.selectedFlows = [];
    this.mark = null;
    this.trackNames = new Map();
    /** The counter series (`{name, group}`, the rows of the Counters section) and their latest points by key. */
    this.counterSeries = [];
    this.counterData = new Map();
    this.countersController = null;
    /** Pinned track ids (shown first, in pinning order) and the track filter text, both kept in the URL. */
    const params = context.params;
    this.pinned = params && params.get('pinned') ? params.get('pinned').split(',').map(Number).filter(Number.isFinite) : [];
    /** Track ids in the order the user dragged them to, within their sections (URL `track_order`). */
    this.trackOrder = params && params.get('track_order') ? params.get('track_order').split(',').map(Number).filter(Number.isFinite) : [];
    this.trackFilter = (params && params.get('track_filter')) || '';
    this.detailsShown = false;
    this.frameRequest = 0;
    this.urlTimer = 0;
    this.eventController = null;
    this.metaController = null;
    this.destroyed = false;
    this.loader = new ViewLoader(this.api, {
      onFrame: (frame) => {
        this.store.apply(frame);
        this.loadCounters(frame.query);
        if (this.status.classList.contains('tv-error')) this.setStatus('', false);
        this.root.dataset.frames = String(Number(this.root.dataset.frames || 0) + 1);
        this.requestDraw();
      },
      onBusy: (busy) => this.setBusy(busy),
      onError: (error) => this.setStatus(`view: ${error.message}`, true),
    });
    this.buildDom();
  }

  buildDom() {
    ensureStylesheet();
    this.canvas = h('canvas', { class: 'tv-canvas' });
    this.ctx = this.canvas.getContext('2d');
    this.spacer = h('div', { class: 'tv-spacer' });
    this.scroller = h('div', { class: 'tv-scroller', tabindex: '0' }, this.spacer);
    this.tooltip = h('div', { class: 'tv-tooltip', hidden: true });
    this.help = helpOverlay(() => this.toggleHelp(false));
    this.message = h('div', { class: 'tv-message' }, 'Loading trace…');
    this.stage = h('div', { class: 'tv-stage' }, this.canvas, this.scroller, this.tooltip, this.message, this.help);
    this.search = new SearchPanel(this.api, {
      windowStartPs: () => this.window.startPs,
      onJump: (result) => this.jumpTo(result.id, 'fit', result),
      onError: (error) => this.setStatus(`search: ${error.message}`, true),
      trackName: (id) => this.trackName(id),
      onListChange: (shown) => {
        if (shown) this.pane.closed = false;
        this.refreshPane();
      },
    });
    this.detailsElement = h('div', { class: 'tv-details' });
    this.details = new DetailsPane(this.detailsElement, {
      onJump: (id) => this.jumpTo(id, 'center'),
      onZoom: (startPs, endPs) => this.setWindow(fitRange(this.trace, startPs, endPs - startPs)),
      onPin: (track) => this.togglePin(track),
      isPinned: (track) => this.pinned.includes(track),
    });
    this.rangeElement = h('div', { class: 'tv-details tv-range-pane', hidden: true });
    this.range = new RangePane(this.rangeElement, this.api, {
      trackName: (id) => this.trackName(id),
      onError: (error) => this.setStatus(`range: ${error.message}`, true),
    });
    this.pane = new BottomPane({
      details: this.detailsElement,
      range: this.rangeElement,
      results: this.search.list,
      onShown: (what) => {
        this.root.dataset.pane = what;
      },
    });
    this.filterInput = h('input', {
      class: 'tv-track-filter',
      type: 'search',
      placeholder: 'Filter tracks',
      'aria-label': 'Show only the tracks whose name holds this text',
      value: this.trackFilter,
      oninput: () => this.setTrackFilter(this.filterInput.value),
    });
    this.rangeLabel = h('span', { class: 'tv-range' });
    this.markLabel = h('span', { class: 'tv-mark', hidden: true });
    this.status = h('span', { class: 'tv-status' });
    this.flowNote = h('span', { class: 'tv-muted tv-flow-note', hidden: true });
    this.alignmentNote = h('span', { class: 'tv-muted tv-alignment', hidden: true });
    this.root = h(
      'div',
      { class: 'tv' },
      h(
        'div',
        { class: 'tv-toolbar' },
        this.search.bar,
        this.filterInput,
        this.rangeLabel,
        this.alignmentNote,
        this.markLabel,
        this.flowNote,
        this.status,
        h(
          'button',
          {
            class: 'tv-button tv-help-button',
            type: 'button',
            title: 'Shortcuts (?)',
            onclick: () => this.toggleHelp(),
          },
          '?',
        ),
      ),
      this.stage,
      this.pane.element,
    );
    this.root.traceViewerProbe = traceProbe(this);
    this.element.replaceChildren(this.root);
    this.refreshPane();
    this.stripes = stripePattern(this.ctx);
  }

  start() {
    this.detachInput = attachInput(this);
    this.onScroll = () => {
      this.hideTooltip();
      this.requestDraw();
      this.requestView();
    };
    this.scroller.addEventListener('scroll', this.onScroll);
    this.resizeObserver = new ResizeObserver(() => this.resize());
    this.resizeObserver.observe(this.stage);
    this.detachSplitter = this.pane.attachSplitter(this.root);
    const main = this.element.closest('main');
    if (main) main.classList.add('tv-full-height');
    this.loadMeta();
  }

  destroy() {
    this.destroyed = true;
    this.loader.cancel();
    this.search.cancel();
    if (this.eventController) this.eventController.abort();
    if (this.metaController) this.metaController.abort();
    if (this.countersController) this.countersController.abort();
    clearTimeout(this.urlTimer);
    cancelAnimationFrame(this.frameRequest);
    if (this.detachInput) this.detachInput();
    if (this.detachSplitter) this.detachSplitter();
    this.range.cancel();
    const main = this.element.closest('main');
    if (main) main.classList.remove('tv-full-height');
    this.scroller.removeEventListener('scroll', this.onScroll);
    if (this.resizeObserver) this.resizeObserver.disconnect();
    this.root.remove();
  }

  async loadMeta() {
    this.metaController = new AbortController();
    let meta;
    try {
      meta = await this.api.meta(this.metaController.signal);
    } catch (error) {
      if (!isAbort(error)) this.showMessage(`Cannot load the trace: ${error.message}`, true);
      return;
    }
    if (this.destroyed) return;
    this.meta = meta;
    const sections = Array.isArray(meta.sections) ? meta.sections : [];
    this.trackNames = new Map(sections.flatMap((section) => section.tracks.map((track) => [track.id, track.name])));
    const startPs = Number(meta.start_ps) || 0;
    const endPs = Number(meta.end_ps) || 0;
    this.trace = { startPs, endPs: Math.max(endPs, startPs + 1) };
    // Every host on one axis (host=all): how they were aligned.
    this.alignmentNote.hidden = !meta.alignment;
    this.alignmentNote.textContent = meta.alignment ? `Hosts ${meta.alignment}` : '';
    this.rebuildLayout();
    if (sections.every((section) => section.tracks.length === 0)) {
      this.showMessage('This host has no trace events.', false);
      return;
    }
    this.message.hidden = true;
    const params = this.context.params;
    const fromUrl = readWindow(params);
    this.window = fromUrl ? clampWindow(this.trace, fromUrl) : fullWindow(this.trace);
    this.root.dataset.ready = '1';
    this.resize();
    this.updateRangeLabel();
    const event = params ? params.get('event') : null;
    if (event !== null && event !== '' && Number.isFinite(Number(event))) {
      this.jumpTo(Number(event), fromUrl ? 'reveal' : 'fit');
    }
  }

  // ---- geometry -------------------------------------------------------------------

  /** Width of the drawing (the scroller without its scrollbar). */
  width() {
    return this.scroller.clientWidth;
  }

  height() {
    return this.scroller.clientHeight;
  }

  labelWidth() {
    return labelWidth(this.width());
  }

  /** Time under x (CSS px from the stage's left). */
  timeAt(x) {
    const left = this.labelWidth();
    const span = this.window.endPs - this.window.startPs;
    return this.window.startPs + ((x - left) / Math.max(1, this.width() - left)) * span;
  }

  /** Picoseconds per CSS pixel in the current window. */
  psPerPx() {
    return (this.window.endPs - this.window.startPs) / Math.max(1, this.width() - this.labelWidth());
  }

  /** The layout row under y (CSS px from the stage's top), or null (ruler, empty space). */
  rowAtY(y) {
    if (y < RULER_HEIGHT) return null;
    return rowAt(this.layout, y - RULER_HEIGHT + this.scroller.scrollTop);
  }

  /** What is drawn at (x, y): a hit from the store (see TrackStore.hit) plus its row, or null. */
  hitAt(x, y) {
    if (x < this.labelWidth()) return null;
    const row = this.rowAtY(y);
    if (!row || row.kind !== 'track') return null;
    const inRow = y - RULER_HEIGHT + this.scroller.scrollTop - row.y;
    const depth = Math.floor((inRow - TRACK_PADDING) / LEVEL_HEIGHT);
    if (depth < 0 || depth >= Math.max(1, row.track.depth)) return null;
    const hit = this.store.hit(row.track.id, depth, this.timeAt(x), this.psPerPx() * 2);
    return hit ? { ...hit, row } : null;
  }

  /** Fraction (0…1) across the timeline of x, or the middle when x is outside it. */
  anchorAt(x) {
    const left = this.labelWidth();
    if (x === null || x === undefined || x < left || x > this.width()) return 0.5;
    return (x - left) / Math.max(1, this.width() - left);
  }

  // ---- state changes --------------------------------------------------------------

  /** Shows `window` (clamped), redraws, asks for its data and updates the URL soon. */
  setWindow(window) {
    if (!this.meta) return;
    this.window = clampWindow(this.trace, window);
    this.updateRangeLabel();
    this.requestDraw();
    this.requestView();
    clearTimeout(this.urlTimer);
    this.urlTimer = setTimeout(() => {
      this.setParams({
        start_ps: String(Math.round(this.window.startPs)),
        end_ps: String(Math.round(this.window.endPs)),
      });
    }, URL_DELAY_MS);
  }

  zoom(factor, anchor) {
    this.setWindow(zoomAround(this.trace, this.window, factor, anchor));
  }

  pan(fraction) {
    this.setWindow(panBy(this.trace, this.window, fraction));
  }

  resetZoom() {
    this.setWindow(fullWindow(this.trace));
  }

  /** Fits the selected event, else the marked range. */
  fitSelection() {
    if (this.selected) this.setWindow(fitRange(this.trace, this.selected.start_ps, this.selected.dur_ps));
    else if (this.mark) this.setWindow(fitRange(this.trace, this.mark.startPs, this.mark.endPs - this.mark.startPs));
  }

  /**
   * Marks [startPs, endPs] on `tracks` (track ids; all tracks when absent) and shows
   * what the range holds in the pane; null clears the mark.
   */
  setMark(mark) {
    this.mark = mark && mark.endPs > mark.startPs ? { ...mark, tracks: mark.tracks && mark.tracks.length ? mark.tracks : this.allTrackIds() } : null;
    if (this.mark) {
      const { startPs, endPs } = this.mark;
      this.pane.open('range');
      this.range.show(this.mark);
      this.markLabel.hidden = false;
      this.markLabel.title = `${formatTime(startPs, 1000)} – ${formatTime(endPs, 1000)}`;
      this.markLabel.replaceChildren(
        `Marked ${formatDuration(endPs - startPs)} `,
        h(
          'button',
          { class: 'tv-link', type: 'button', title: 'Clear the mark (Esc)', onclick: () => this.setMark(null) },
          '×',
        ),
      );
      this.root.dataset.markPs = String(endPs - startPs);
    } else {
      this.markLabel.hidden = true;
      this.markLabel.replaceChildren();
      delete this.root.dataset.markPs;
      this.range.cancel();
    }
    this.refreshPane();
    this.requestDraw();
  }

  /** `M`: marks the selected event's range on its track, so the pane shows its children. */
  markSelection() {
    if (!this.selected) return;
    const startPs = this.selected.start_ps;
    const endPs = startPs + this.selected.dur_ps;
    if (this.mark && this.mark.startPs === startPs && this.mark.endPs === endPs) this.setMark(null);
    else this.setMark({ startPs, endPs, tracks: [this.selected.track] });
  }

  /** Shows only the tracks (and counters) whose name holds `text`; '' shows all. */
  setTrackFilter(text) {
    this.trackFilter = text;
    this.rebuildLayout();
    this.requestDraw();
    this.requestView();
    this.setParams({ track_filter: text || null });
  }

  /** `P`: pins the selected event's track at the top, or unpins it. */
  togglePinSelected() {
    if (this.selected) this.togglePin(this.selected.track);
  }

  /** Pins track `id` first (under the counters), or returns it to its section. */
  togglePin(id) {
    this.pinned = this.pinned.includes(id) ? this.pinned.filter((one) => one !== id) : [...this.pinned, id];
    this.rebuildLayout();
    this.revealTrack(id);
    this.setParams({ pinned: this.pinned.length ? this.pinned.join(',') : null });
    if (this.selected) this.details.setPinned(this.pinned.includes(this.selected.track));
  }

  /**
   * The track row a label drag may move at stage position `y` (a track of a
   * section or of the pinned ones), or null.
   */
  movableTrackAt(y) {
    const row = this.rowAtY(y);
    return row && row.kind === 'track' ? row : null;
  }

  /**
   * Moves track `id` to where track `target` is, in the same section (the pinned tracks
   * reorder the pins); the others shift. The order goes to the URL when the drag ends
   * (`commitTrackOrder`).
   */
  moveTrack(id, target) {
    if (id === target) return;
    const rows = this.layout.rows.filter((row) => row.kind === 'track');
    const from = rows.find((row) => row.track.id === id);
    const to = rows.find((row) => row.track.id === target);
    if (!from || !to || from.sectionIndex !== to.sectionIndex) return;
    const ids = rows.filter((row) => row.sectionIndex === from.sectionIndex).map((row) => row.track.id);
    ids.splice(ids.indexOf(id), 1);
    ids.splice(ids.indexOf(target) + (to.y > from.y ? 1 : 0), 0, id);
    if (from.sectionIndex === PINNED) {
      this.pinned = ids;
    } else {
      // The section's whole order: its tracks hidden by the filter keep their places after it.
      const section = this.meta.sections[from.sectionIndex];
      const rest = section.tracks.map((track) => track.id).filter((one) => !ids.includes(one));
      const inSection = new Set(section.tracks.map((track) => track.id));
      this.trackOrder = [...this.trackOrder.filter((one) => !inSection.has(one)), ...ids, ...rest];
    }
    this.rebuildLayout();
    this.requestDraw();
    this.requestView();
  }

  /** Keeps the track order and pins in the URL (after a label drag). */
  commitTrackOrder() {
    this.setParams({
      track_order: this.trackOrder.length ? this.trackOrder.join(',') : null,
      pinned: this.pinned.length ? this.pinned.join(',') : null,
    });
  }

  /** Every track id of the host. */
  allTrackIds() {
    return [...this.trackNames.keys()];
  }

  /** Track `id`'s name. */
  trackName(id) {
    return this.trackNames.get(id) ?? `track ${id}`;
  }

  /**
   * The tracks whose rows a vertical stretch of the stage covers (stage y from y0 to
   * y1); a folded section counts with all its tracks; the ruler, or nothing, means all.
   */
  tracksBetweenY(y0, y1) {
    if (Math.min(y0, y1) < RULER_HEIGHT) return this.allTrackIds();
    const top = Math.min(y0, y1) - RULER_HEIGHT + this.scroller.scrollTop;
    const bottom = Math.max(y0, y1) - RULER_HEIGHT + this.scroller.scrollTop + 1;
    const ids = [];
    for (const row of rowsBetween(this.layout, top, bottom)) {
      if (row.kind === 'track') ids.push(row.track.id);
      else if (this.collapsed.has(row.sectionIndex)) ids.push(...row.section.tracks.map((track) => track.id));
    }
    return ids.length ? ids : this.allTrackIds();
  }

  // ---- the pane under the timeline ------------------------------------------------

  /** Opens the pane on the details of an event or merged run. */
  showDetails() {
    this.detailsShown = true;
    this.pane.open('details');
    this.refreshPane();
  }

  /** Tells the pane what it has to show. */
  refreshPane() {
    this.pane.refresh({
      hasDetails: this.detailsShown,
      hasRange: this.mark !== null,
      detailsLabel: this.selected ? 'Event' : 'Merged events',
    });
  }

  /** Esc: closes the help, else clears the mark, else the selection. */
  escape() {
    if (!this.help.hidden) this.toggleHelp(false);
    else if (this.mark) this.setMark(null);
    else if (this.selected) this.clearSelection();
  }

  toggleHelp(show = this.help.hidden) {
    this.help.hidden = !show;
  }

  focusSearch() {
    this.search.input.focus();
    this.search.input.select();
  }

  toggleSection(sectionIndex) {
    if (this.collapsed.has(sectionIndex)) this.collapsed.delete(sectionIndex);
    else this.collapsed.add(sectionIndex);
    this.rebuildLayout();
    this.requestDraw();
    this.requestView();
  }

  /** Asks for the counter series over the window of a view request (`{startPs, endPs, widthPx}`). */
  async loadCounters(query) {
    if (this.countersController) this.countersController.abort();
    const controller = new AbortController();
    this.countersController = controller;
    let answer;
    try {
      answer = await this.api.counters(query, controller.signal);
    } catch (error) {
      if (!isAbort(error) && this.countersController === controller) this.setStatus(`counters: ${error.message}`, true);
      return;
    }
    if (this.countersController !== controller || this.destroyed) return;
    this.root.dataset.countersReady = '1';
    const series = Array.isArray(answer.series) ? answer.series : [];
    this.counterData = new Map(series.map((one) => [counterKey(one), one]));
    if (series.length !== this.counterSeries.length) {
      this.counterSeries = series.map(({ name, group }) => ({ name, group }));
      this.root.dataset.counters = String(series.length);
      this.rebuildLayout();
    }
    this.requestDraw();
  }

  rebuildLayout() {
    const sections = this.meta && Array.isArray(this.meta.sections) ? this.meta.sections : [];
    this.layout = buildLayout(sections, this.collapsed, this.counterSeries, { pinned: this.pinned, filter: this.trackFilter, order: this.trackOrder });
    this.spacer.style.height = `${RULER_HEIGHT + this.layout.height}px`;
    this.root.dataset.tracks = String(this.layout.rows.filter((row) => row.kind === 'track').length);
    this.root.dataset.pinned = this.pinned.join(',');
    this.root.dataset.trackOrder = this.trackOrder.join(',');
  }

  /** Click at (x, y): a section header folds, an event is selected, a merged run described. */
  clickAt(x, y) {
    const row = this.rowAtY(y);
    if (row && row.kind === 'section') {
      this.toggleSection(row.sectionIndex);
      return;
    }
    const hit = this.hitAt(x, y);
    if (!hit) {
      this.clearSelection();
      return;
    }
    if (hit.kind === 'merged') {
      this.clearSelection();
      this.details.showMerged(hit, hit.row.track.name);
      this.showDetails();
      return;
    }
    this.selected = {
      id: hit.id,
      name: hit.name,
      track: hit.row.track.id,
      start_ps: hit.startPs,
      dur_ps: hit.durPs,
      depth: hit.depth,
    };
    this.selectedFlows = [];
    this.requestDraw();
    this.loadSelected(hit.id, null);
  }

  clearSelection() {
    if (this.eventController) this.eventController.abort();
    this.selected = null;
    this.selectedFlows = [];
    delete this.root.dataset.selected;
    this.details.showEmpty();
    this.detailsShown = false;
    this.refreshPane();
    this.setParams({ event: null });
    this.requestDraw();
  }

  /**
   * Selects event `id` and moves to it: `'fit'` zooms to it, `'center'` keeps the zoom
   * (unless it does not fit), `'reveal'` only scrolls its track into view, null leaves
   * the view alone. `hint` (a search result) lets
   * the move start before the event's details arrive.
   */
  jumpTo(id, move, hint = null) {
    if (hint && move) this.moveTo(hint.track, hint.start_ps, hint.dur_ps, move);
    this.loadSelected(id, hint ? null : move);
  }

  moveTo(trackId, startPs, durPs, move) {
    this.revealTrack(trackId);
    if (move === 'fit') this.setWindow(fitRange(this.trace, startPs, durPs));
    else if (move === 'center') this.setWindow(centerOn(this.trace, this.window, startPs, durPs));
  }

  async loadSelected(id, move) {
    if (this.eventController) this.eventController.abort();
    const controller = new AbortController();
    this.eventController = controller;
    this.details.showLoading();
    this.showDetails();
    let event;
    try {
      event = await this.api.event(id, controller.signal);
    } catch (error) {
      if (!isAbort(error) && this.eventController === controller)
        this.details.showError(`Event ${id}: ${error.message}`);
      return;
    }
    if (this.eventController !== controller || this.destroyed) return;
    this.selected = event;
    this.selectedFlows = Array.isArray(event.flows) ? event.flows : [];
    this.root.dataset.selected = String(event.id);
    this.details.showEvent(event);
    this.setParams({ event: String(event.id) });
    if (move) this.moveTo(event.track, event.start_ps, event.dur_ps, move);
    this.requestDraw();
  }

  /** Unfolds the section holding `trackId` and scrolls it into view. */
  revealTrack(trackId) {
    let row = this.layout.byTrack.get(trackId);
    if (!row) return;
    if (row.kind === 'section') {
      this.collapsed.delete(row.sectionIndex);
      this.rebuildLayout();
      row = this.layout.byTrack.get(trackId);
    }
    const visible = this.height() - RULER_HEIGHT;
    const top = this.scroller.scrollTop;
    if (row.y < top || row.y + Math.min(row.height, visible) > top + visible) {
      this.scroller.scrollTop = Math.max(0, row.y - visible / 3);
    }
    this.requestDraw();
    this.requestView();
  }

  // ---- hover ----------------------------------------------------------------------

  hoverAt(x, y) {
    const hit = this.hitAt(x, y);
    let text = null;
    if (hit && hit.kind === 'event')
      text = `${hit.name}\n${formatDuration(hit.durPs)} at ${formatTime(hit.startPs, 1000)}`;
    else if (hit) {
      text = `${hit.count.toLocaleString('en-US')} events merged over ${formatDuration(hit.endPs - hit.startPs)}\nlongest: ${hit.name}`;
    } else if (x < this.labelWidth()) {
      const row = this.rowAtY(y);
      if (row && row.kind === 'track')
        text = `${row.track.name}\n${Number(row.track.events).toLocaleString('en-US')} events, ${row.track.depth} levels`;
      else if (row && row.kind === 'counter') text = `${row.series.name}\n${row.series.group}`;
    } else {
      const row = this.rowAtY(y);
      if (row && row.kind === 'counter') text = this.counterText(row.series, this.timeAt(x));
    }
    if (text === null) {
      this.hideTooltip();
      return;
    }
    this.tooltip.textContent = text;
    this.tooltip.hidden = false;
    const flip = x > this.width() - 260;
    this.tooltip.style.left = flip ? '' : `${x + 14}px`;
    this.tooltip.style.right = flip ? `${this.stage.clientWidth - x + 14}px` : '';
    this.tooltip.style.top = `${Math.min(y + 16, this.stage.clientHeight - 48)}px`;
  }

  /** The reading of `series` in force at `timePs`, for the tooltip. */
  counterText(series, timePs) {
    const data = this.counterData.get(counterKey(series));
    const points = data ? data.points : [];
    let at = -1;
    for (let i = 0; i < points.length && points[i][0] <= timePs; i++) at = i;
    if (at < 0) return `${series.name}: no reading yet at ${formatTime(timePs, 1000)}`;
    const [, least, greatest, last] = points[at];
    const value = series.name.endsWith('(bytes)') ? formatBytes : (number) => formatNumber(number, 2);
    const range = value(greatest) !== value(least) ? ` (${value(least)} – ${value(greatest)} within the pixel)` : '';
    return `${series.name}: ${value(last)}${range}\n${series.group}, at ${formatTime(points[at][0], 1000)}`;
  }

  hideTooltip() {
    this.tooltip.hidden = true;
  }

  // ---- drawing and loading --------------------------------------------------------

  resize() {
    const ratio = window.devicePixelRatio || 1;
    const width = this.stage.clientWidth;
    const height = this.stage.clientHeight;
    this.canvas.style.width = `${width}px`;
    this.canvas.style.height = `${height}px`;
    this.canvas.width = Math.max(1, Math.round(width * ratio));
    this.canvas.height = Math.max(1, Math.round(height * ratio));
    this.ratio = ratio;
    this.draw();
    this.loader.invalidate();
    this.requestView();
  }

  requestDraw() {
    if (this.frameRequest) return;
    this.frameRequest = requestAnimationFrame(() => {
      this.frameRequest = 0;
      this.draw();
    });
  }

  draw() {
    if (this.destroyed || !this.meta) return;
    this.ctx.setTransform(this.ratio, 0, 0, this.ratio, 0, 0);
    const { flowsHidden, flowsDrawn } = drawScene(this.ctx, this.scene());
    this.root.dataset.flowsDrawn = String(flowsDrawn);
    this.flowNote.hidden = flowsHidden === 0;
    this.flowNote.textContent = `${flowsHidden.toLocaleString('en-US')} flow arrows not drawn, too dense (zoom in)`;
    this.root.dataset.flowsHidden = String(flowsHidden);
  }

  scene() {
    return {
      width: this.width(),
      height: this.height(),
      labelWidth: this.labelWidth(),
      window: this.window,
      trace: this.trace,
      layout: this.layout,
      scrollTop: this.scroller.scrollTop,
      store: this.store,
      counters: this.counterData,
      collapsed: this.collapsed,
      selected: this.selected,
      selectedFlows: this.selectedFlows,
      mark: this.mark,
      stripes: this.stripes,
    };
  }

  /** Track ids in view, plus half a screen above and below. */
  visibleTracks() {
    const top = this.scroller.scrollTop;
    const visible = this.height() - RULER_HEIGHT;
    return rowsBetween(this.layout, top - visible / 2, top + visible * 1.5)
      .filter((row) => row.kind === 'track')
      .map((row) => row.track.id);
  }

  requestView() {
    if (!this.meta) return;
    this.loader.request({
      startPs: this.window.startPs,
      endPs: this.window.endPs,
      widthPx: this.width() - this.labelWidth(),
      tracks: this.visibleTracks(),
    });
  }

  setBusy(busy) {
    this.root.dataset.loading = busy ? '1' : '0';
    if (busy) this.setStatus('loading…', false);
    else if (!this.status.classList.contains('tv-error')) this.setStatus('', false);
  }

  setStatus(text, error) {
    this.status.textContent = text;
    this.status.classList.toggle('tv-error', error);
  }

  showMessage(text, error) {
    this.message.hidden = false;
    this.message.textContent = text;
    this.message.classList.toggle('tv-error', error);
  }

  updateRangeLabel() {
    const { startPs, endPs } = this.window;
    const resolution = (endPs - startPs) / 100;
    this.rangeLabel.textContent = `${formatTime(startPs, resolution)} – ${formatTime(endPs, resolution)} (${formatDuration(endPs - startPs)})`;
    this.root.dataset.startPs = String(Math.round(startPs));
    this.root.dataset.endPs = String(Math.round(endPs));
  }

  setParams(values) {
    if (typeof this.context.setParams === 'function') this.context.setParams(values);
  }
}

/** `start_ps`/`end_ps` from the URL as a window, or null when absent or malformed. */
function readWindow(params) {
  if (!params) return null;
  const startPs = Number(params.get('start_ps'));
  const endPs = Number(params.get('end_ps'));
  if (!params.has('start_ps') || !params.has('end_ps')) return null;
  if (!Number.isFinite(startPs) || !Number.isFinite(endPs) || endPs <= startPs) return null;
  return { startPs, endPs };
}

/** Adds trace.css (beside this module) to the document once. */
function ensureStylesheet() {
  if (document.querySelector('link[data-trace-viewer]')) return;
  const link = h('link', {
    rel: 'stylesheet',
    href: new URL('./trace.css', import.meta.url).href,
    dataset: { traceViewer: '1' },
  });
  document.head.append(link);
}
