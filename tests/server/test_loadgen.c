/* The load generator's statistics: percentiles by linear interpolation
 * between order statistics (numpy's default, as qtts-bench), so that the
 * median of an even count is the mean of the two middle values; a burst
 * whose first half is served early and second half late must not read as if
 * all were served early (the nearest-rank median of 8 was the 4th value). */
#include <math.h>

#include "loadgen.h"
#include "test.h"

int main(void) {
    const double eight[8] = {185, 185, 207, 210, 401, 425, 431, 461}; /* ms: 2 of 4 served early, twice */
    CHECK("loadgen: the median of an even count is the mean of the middle two",
          lg_percentile(eight, 8, 50) == (210 + 401) / 2.0, "%g", lg_percentile(eight, 8, 50));
    const double odd[5] = {1, 2, 3, 4, 100};
    CHECK("loadgen: the median of an odd count is the middle value", lg_percentile(odd, 5, 50) == 3, "%g",
          lg_percentile(odd, 5, 50));
    /* numpy.percentile([1, 2, 3, 4, 100], 95) = 80.8 */
    CHECK("loadgen: p95 interpolates between the last two", fabs(lg_percentile(odd, 5, 95) - 80.8) < 1e-9, "%g",
          lg_percentile(odd, 5, 95));
    CHECK("loadgen: p0 and p100 are the ends, one value is itself",
          lg_percentile(odd, 5, 0) == 1 && lg_percentile(odd, 5, 100) == 100 && lg_percentile(odd, 1, 50) == 1 &&
              lg_percentile(odd, 1, 95) == 1,
          "ends wrong");
    CHECK("loadgen: no values, no percentile", isnan(lg_percentile(odd, 0, 50)), "not NaN");
    return test_finish();
}
