// The step-time graph of the overview and input pipeline pages: one stacked column
// per step, one segment per XProf generic step-time category.

import { stackedColumns } from '../charts/columns.js';
import { formatMs } from '../lib/format.js';

/**
 * XProf's generic step-time categories, in XProf's id order (the order of
 * `pod_viewer::CATEGORIES` and of a pod record's `breakdown_us`), with the field
 * of an input-pipeline step (`*_ms`) that holds each.
 */
export const STEP_CATEGORIES = [
  { label: 'Device compute', field: 'device_compute_ms', color: '#4285f4' },
  { label: 'Device to device', field: 'device_to_device_ms', color: '#00acc1' },
  { label: 'Device collective communication', field: 'device_collectives_ms', color: '#ab47bc' },
  { label: 'Host compute', field: 'host_compute_ms', color: '#0f9d58' },
  { label: 'Kernel launch', field: 'kernel_launch_ms', color: '#f4b400' },
  { label: 'Input', field: 'input_ms', color: '#db4437' },
  { label: 'Output', field: 'output_ms', color: '#ff7043' },
  { label: 'Compilation', field: 'compile_ms', color: '#5c6bc0' },
  { label: 'All others', field: 'other_ms', color: '#9e9e9e' },
];

/** Input split the way the input pipeline analyzer shows it. */
const INPUT_PARTS = [
  { label: 'Input: host waiting for input', field: 'host_wait_input_ms', color: '#db4437' },
  { label: 'Input: host to device', field: 'host_to_device_ms', color: '#f06292' },
];


/**
 * The chart of `steps` (input-pipeline steps with `step_name`, `step_time_ms` and
 * the category fields); `splitInput` shows Input as its two parts.
 */
export function stepTimeChart(steps, { title = 'Step-time graph', splitInput = false } = {}) {
  const categories = splitInput
    ? STEP_CATEGORIES.flatMap((category) => (category.field === 'input_ms' ? INPUT_PARTS : [category]))
    : STEP_CATEGORIES;
  return stackedColumns({
    title,
    // Labelled by the step's number as the profile numbers it (as every mlprof output
    // does), thinned by the chart; the tooltip gives the name.
    columns: steps.map((step) => String(step.profile_step ?? step.step_num)),
    series: categories.map((category) => ({ label: category.label, color: category.color, values: steps.map((step) => step[category.field] || 0) })),
    yLabel: 'Step time (ms)',
    xLabel: 'Step',
    format: formatMs,
    details: (i) => [['Step', steps[i].step_name || String(steps[i].profile_step ?? steps[i].step_num)], ['Step time', formatMs(steps[i].step_time_ms)]],
    empty: 'No steps were found in this profile.',
  });
}

/**
 * The tone of an input-time share: `bad` from XProf's moderately input-bound
 * threshold (5 % of step time waiting for input) up.
 */
export function inputTone(inputPercent) {
  return inputPercent >= 5 ? 'bad' : '';
}
