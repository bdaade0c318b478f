#include "results.hpp"

#include "json_writer.hpp"

namespace perf {

namespace {

void side(JsonWriter& w, const char* prefix, const SideResult& r) {
  const std::string p(prefix);
  if (r.skipped) {
    for (const char* k : {"time_us", "algbw", "busbw", "wrong"}) {
      w.key(p + k);
      w.null();
    }
    return;
  }
  w.key(p + "time_us");
  w.value(r.time_us);
  w.key(p + "algbw");
  w.value(r.algbw);
  w.key(p + "busbw");
  w.value(r.busbw);
  w.key(p + "wrong");
  if (r.checked)
    w.value(static_cast<int64_t>(r.wrong));
  else
    w.null();
}

}  // namespace

std::string results_json(const RunSummary& s) {
  const Options& o = s.options;
  JsonWriter w;
  w.begin_object();
  w.key("tool");
  w.value(s.tool);
  w.key("version");
  w.value(s.version);
  w.key("backend");
  w.value(s.backend);
  w.key("collective");
  w.value(s.collective);
  w.key("ranks");
  w.value(s.ranks);
  w.key("config");
  w.begin_object();
  w.key("minbytes");
  w.value(static_cast<uint64_t>(o.min_bytes));
  w.key("maxbytes");
  w.value(static_cast<uint64_t>(o.max_bytes));
  w.key(o.step_factor > 1 ? "stepfactor" : "stepbytes");
  w.value(static_cast<uint64_t>(o.step_factor > 1 ? o.step_factor : o.step_bytes));
  w.key("iters");
  w.value(o.iters);
  w.key("warmup_iters");
  w.value(o.warmup_iters);
  w.key("check");
  w.value(o.check);
  w.key("average");
  w.value(static_cast<int>(o.average));
  w.key("blocking");
  w.value(o.blocking);
  w.key("in_place");
  w.value(o.in_place);
  w.end_object();
  w.key("results");
  w.begin_array();
  for (const RowRecord& r : s.rows) {
    w.newline();
    w.begin_object();
    w.key("collective");
    w.value(r.collective);
    w.key("size");
    w.value(static_cast<uint64_t>(r.key.bytes));
    w.key("count");
    w.value(static_cast<uint64_t>(r.key.count));
    w.key("type");
    w.value(r.key.type);
    w.key("op");
    w.value(r.key.op);
    w.key("root");
    w.value(r.key.root);
    w.key("ranks");
    w.value(r.ranks);
    side(w, "oop_", r.out_of_place);
    side(w, "ip_", r.in_place);
    w.end_object();
  }
  w.end_array();
  w.newline();
  w.key("out_of_bounds");
  w.value(s.error_count);
  w.key("avg_busbw");
  w.value(s.avg_busbw);
  w.end_object();
  w.newline();
  return w.str();
}

}  // namespace perf
