// The run list as `/api/runs` answers it again and again (the server rediscovers
// the log directory): what changed since the list the page holds.

function sameFiles(a, b) {
  return a.format === b.format && a.hosts.length === b.hosts.length && a.hosts.every((host, i) => host === b.hosts[i]);
}

/**
 * Merges `fresh` (a new `/api/runs` list) into `current` (the list the page holds).
 * Returns `{runs, removed, changedFiles, orderChanged}`: the new list in the
 * server's order (newest first) — an unchanged run keeps the entry the page holds
 * when that one has the exact tool list and the fresh one does not; the names of
 * the runs gone; of the runs whose format or hosts changed (their answers are
 * stale); and whether the list of names differs at all.
 */
export function mergeRuns(current, fresh) {
  const known = new Map(current.map((run) => [run.name, run]));
  const changedFiles = [];
  const runs = fresh.map((entry) => {
    const before = known.get(entry.name);
    if (!before) return entry;
    if (!sameFiles(before, entry)) {
      changedFiles.push(entry.name);
      return entry;
    }
    return before.tools_exact !== false && entry.tools_exact === false ? before : entry;
  });
  const names = new Set(fresh.map((run) => run.name));
  const removed = current.filter((run) => !names.has(run.name)).map((run) => run.name);
  const orderChanged = current.length !== fresh.length || current.some((run, i) => run.name !== fresh[i].name);
  return { runs, removed, changedFiles, orderChanged };
}
