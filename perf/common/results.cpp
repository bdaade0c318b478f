#include "results.hpp"

#include <nlohmann/json.hpp>

namespace perf {

namespace {

using Json = nlohmann::ordered_json;  // keys stay in the order they are written

// One side of a row, its keys prefixed "oop_" or "ip_"; null where not run or not checked.
void put_side(Json& row, const std::string& prefix, const SideResult& r) {
  row[prefix + "time_us"] = r.skipped ? Json() : Json(r.time_us);
  row[prefix + "algbw"] = r.skipped ? Json() : Json(r.algbw);
  row[prefix + "busbw"] = r.skipped ? Json() : Json(r.busbw);
  row[prefix + "wrong"] = r.skipped || !r.checked ? Json() : Json(r.wrong);
  row[prefix + "barrier_us"] = r.skipped || r.barrier_us < 0 ? Json() : Json(r.barrier_us);
}

Json config(const Options& o) {
  Json c;
  c["minbytes"] = o.min_bytes;
  c["maxbytes"] = o.max_bytes;
  if (o.step_factor > 1)
    c["stepfactor"] = o.step_factor;
  else
    c["stepbytes"] = o.step_bytes;
  c["iters"] = o.iters;
  c["warmup_iters"] = o.warmup_iters;
  c["check"] = o.check;
  c["average"] = static_cast<int>(o.average);
  c["blocking"] = o.blocking;
  c["in_place"] = o.in_place;
  return c;
}

Json row(const RowRecord& r) {
  Json j;
  j["collective"] = r.collective;
  j["size"] = r.key.bytes;
  j["count"] = r.key.count;
  j["type"] = r.key.type;
  j["op"] = r.key.op;
  j["root"] = r.key.root;
  j["ranks"] = r.ranks;
  put_side(j, "oop_", r.out_of_place);
  put_side(j, "ip_", r.in_place);
  return j;
}

}  // namespace

std::string results_json(const RunSummary& s) {
  Json doc;
  doc["tool"] = s.tool;
  doc["version"] = s.version;
  doc["backend"] = s.backend;
  doc["collective"] = s.collective;
  doc["ranks"] = s.ranks;
  doc["config"] = config(s.options);
  doc["results"] = Json::array();
  for (const RowRecord& r : s.rows) doc["results"].push_back(row(r));
  doc["out_of_bounds"] = s.error_count;
  doc["avg_busbw"] = s.avg_busbw;

  // Compact, with one result a line, so that the file reads and diffs by row.
  std::string text = "{";
  for (const auto& [key, value] : doc.items()) {
    if (text.size() > 1) text += ',';
    text += Json(key).dump() + ':';
    if (key != "results") {
      text += value.dump();
      continue;
    }
    text += '[';
    for (size_t i = 0; i < value.size(); ++i) text += (i ? ",\n" : "\n") + value[i].dump();
    text += "\n]";
  }
  return text + "}\n";
}

}  // namespace perf
