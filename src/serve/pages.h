#pragma once
// The pages of `normlab serve`: static HTML with their CSS and JS built in (Chart.js comes from
// /chart.js, Debian's copy); each page asks the server's JSON endpoints for its data and polls them,
// so one page shows a run from its first step to its last.
//
// Every page checks itself and records the result on its body element for a headless browser (the tests):
// data-errors counts script errors, rejected promises and console.error calls; data-charts and
// data-charts-drawn count its charts and those with points on a painted canvas; data-png is 1 when
// the first chart exports as a PNG. The run page adds data-points (train-loss points drawn) and
// data-status and data-analyses (analysis charts drawn), the compare page data-series (runs with a loss
// curve), the index data-runs, data-studies and data-run-statuses / data-study-statuses (each entry's
// status in path order, separated by spaces).
#include <string>

namespace normlab::serve {

std::string index_page();    // every run and study, with status, links and a compare picker
std::string run_page();      // /run?path=P: live curves and, with probes, per-layer profiles with a step slider
std::string compare_page();  // /compare?runs=A&runs=B: loss curves overlaid, against steps or tokens
// A minimal page around `body_html` (already escaped), for directory listings and errors.
std::string plain_page(const std::string& title, const std::string& body_html);

}  // namespace normlab::serve
