/* The option parser of 'viprof record': one parser that checks every value into
 * struct vp_record_opts (recorder/record_request.h; events are only split here, hv-glue
 * parses and live-checks them). */
#ifndef VIPROF_CLI_RECORD_OPTS_H
#define VIPROF_CLI_RECORD_OPTS_H

#include <stdio.h>

#include "recorder/record_request.h"

/* Parses argv (argv[0] = "record") into o, which vp_record_opts__defaults filled.
 * 0 on success (check o->help), -EINVAL with a one-line message in err otherwise.
 * Uses getopt_long, so it resets optind. */
int record_opts__parse(struct vp_record_opts *o, int argc, char **argv, char *err, size_t errlen);
void record_opts__usage(FILE *f);

#endif
