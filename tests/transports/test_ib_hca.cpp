// STRATA_IB_HCA parsing and matching (NCCL_IB_HCA grammar).
#include <gtest/gtest.h>

#include "strata/error.hpp"
#include "transports/ibverbs/ib_hca.hpp"

using namespace strata::ibverbs;

TEST(IbHca, EmptySelectsEverything) {
  HcaFilter f = parse_hca_list("");
  EXPECT_TRUE(f.entries.empty());
  EXPECT_TRUE(hca_selected(f, "mlx5_0", 1));
  EXPECT_TRUE(hca_selected(f, "anything", 2));
}

TEST(IbHca, ListWithPorts) {
  HcaFilter f = parse_hca_list("mlx5_0:1,mlx5_1:1");
  ASSERT_EQ(f.entries.size(), 2u);
  EXPECT_FALSE(f.exclude);
  EXPECT_FALSE(f.exact);
  EXPECT_EQ(f.entries[0].name, "mlx5_0");
  EXPECT_EQ(f.entries[0].port, 1);
  EXPECT_TRUE(hca_selected(f, "mlx5_0", 1));
  EXPECT_TRUE(hca_selected(f, "mlx5_1", 1));
  EXPECT_FALSE(hca_selected(f, "mlx5_0", 2));
  EXPECT_FALSE(hca_selected(f, "mlx5_2", 1));
}

TEST(IbHca, PrefixMatchByDefault) {
  HcaFilter f = parse_hca_list("mlx5");
  EXPECT_EQ(f.entries[0].port, -1);
  EXPECT_TRUE(hca_selected(f, "mlx5_0", 1));
  EXPECT_TRUE(hca_selected(f, "mlx5_13", 2));
  EXPECT_FALSE(hca_selected(f, "mlx4_0", 1));
  // Prefix matching is NCCL's: mlx5_1 also selects mlx5_10.
  EXPECT_TRUE(hca_selected(parse_hca_list("mlx5_1"), "mlx5_10", 1));
}

TEST(IbHca, ExactMatch) {
  HcaFilter f = parse_hca_list("=mlx5_1");
  EXPECT_TRUE(f.exact);
  EXPECT_TRUE(hca_selected(f, "mlx5_1", 1));
  EXPECT_FALSE(hca_selected(f, "mlx5_10", 1));
}

TEST(IbHca, Exclude) {
  HcaFilter f = parse_hca_list("^mlx5_2");
  EXPECT_TRUE(f.exclude);
  EXPECT_TRUE(hca_selected(f, "mlx5_0", 1));
  EXPECT_FALSE(hca_selected(f, "mlx5_2", 1));
  EXPECT_FALSE(hca_selected(f, "mlx5_20", 1));  // prefix
  HcaFilter g = parse_hca_list("^=mlx5_2");
  EXPECT_TRUE(g.exclude && g.exact);
  EXPECT_FALSE(hca_selected(g, "mlx5_2", 1));
  EXPECT_TRUE(hca_selected(g, "mlx5_20", 1));
  HcaFilter h = parse_hca_list("^mlx5_0:2");
  EXPECT_TRUE(hca_selected(h, "mlx5_0", 1));
  EXPECT_FALSE(hca_selected(h, "mlx5_0", 2));
}

TEST(IbHca, SpacesAreTrimmed) {
  HcaFilter f = parse_hca_list(" mlx5_0 : 1 , mlx5_1 ");
  ASSERT_EQ(f.entries.size(), 2u);
  EXPECT_EQ(f.entries[0].name, "mlx5_0");
  EXPECT_EQ(f.entries[0].port, 1);
  EXPECT_EQ(f.entries[1].name, "mlx5_1");
}

TEST(IbHca, MalformedIsInvalidArgumentNamingTheVariable) {
  for (const char* bad : {"mlx5_0:", "mlx5_0:x", "mlx5_0:0", "mlx5_0:256", "mlx5_0:1:2", ",mlx5_0", "mlx5_0,,mlx5_1",
                          "mlx5_0,", ":1", "^", "=", "^=", "=^mlx5_0", "mlx5 0"}) {
    try {
      parse_hca_list(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const strata::InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("STRATA_IB_HCA"), std::string::npos) << e.what();
    }
  }
}
