#pragma once
// What the HTML pages normlab writes (study reports) and serves (the live view) share.
#include <string>

namespace normlab::io {

// Chart.js from Debian's libjs-chart.js (the reports inline it, `normlab serve` serves it); fails naming
// the package when it is missing.
std::string chart_js_source();

// Text made safe inside HTML elements and double-quoted attributes (&, <, >, ").
std::string html_escape(const std::string& s);

}  // namespace normlab::io
