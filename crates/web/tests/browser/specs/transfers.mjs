// The transfers diagnosis: every section's table equals the report's, and the
// time-lost pie has a slice per finding kind.

import { assertSectionTables, openToolPage, sectionId, tooltipOf } from '../lib/ui.mjs';

export default async function (t) {
  const { page, assert } = t;
  const { result, report } = await openToolPage(t, 'transfers');
  await assertSectionTables(t, report);
  const lost = new Map();
  for (const finding of result.findings) lost.set(finding.kind, (lost.get(finding.kind) || 0) + finding.time_lost_ps);
  const kinds = [...lost].filter(([, ps]) => ps > 0).sort((a, b) => b[1] - a[1]);
  const findings = report.sections.find((s) => s.main);
  const slices = page.locator(`#${sectionId(findings.title)} svg.pie .mark`);
  assert.equal(await slices.count(), kinds.length === 1 ? 0 : Math.min(10, kinds.length), 'one slice per finding kind (one kind is said in words)');
  if (kinds.length > 1) assert.ok((await tooltipOf(page, slices.first())).startsWith(kinds[0][0]), 'the largest slice is the kind that lost most time');
  await t.screenshot('transfers-charts');
}
