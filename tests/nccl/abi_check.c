/* Strata's nccl.h against NVIDIA's: every fact of abi_facts.h (enum values, sizes, field
 * offsets, NCCL_CONFIG_INITIALIZER's values) must be equal. Prints each difference and a
 * verdict; exit 0 when they agree.
 *   abi_check           compare
 *   abi_check --plant   show that a difference is caught (one entry of a copy altered) */
#include <stdio.h>
#include <string.h>

#include "abi_facts.h"

int abi_nvidia(struct abi_fact* t);
int abi_ours(struct abi_fact* t);

static int compare(const struct abi_fact* a, int na, const struct abi_fact* b, int nb) {
  int i, bad = 0;
  if (na != nb) {
    printf("the tables differ in length: %d and %d facts\n", na, nb);
    return 1;
  }
  for (i = 0; i < na; ++i)
    if (a[i].value != b[i].value) {
      printf("differs: %s is %lld in NVIDIA's nccl.h and %lld in Strata's\n", a[i].name, a[i].value, b[i].value);
      ++bad;
    }
  return bad;
}

int main(int argc, char** argv) {
  static struct abi_fact nvidia[ABI_MAX_FACTS], ours[ABI_MAX_FACTS];
  const int nn = abi_nvidia(nvidia), no = abi_ours(ours);
  if (argc > 1 && strcmp(argv[1], "--plant") == 0) {
    int caught;
    ours[nn / 2].value += 1;
    caught = compare(nvidia, nn, ours, no) == 1;
    printf("planted difference in %s: %s\n", ours[nn / 2].name, caught ? "caught" : "NOT caught");
    return caught ? 0 : 1;
  }
  if (compare(nvidia, nn, ours, no)) {
    printf("nccl ABI: FAILED\n");
    return 1;
  }
  printf("nccl ABI: %d facts equal in NVIDIA's and Strata's nccl.h\n", nn);
  return 0;
}
