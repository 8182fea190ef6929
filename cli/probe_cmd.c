/* viprof probe [--json]: what this machine or VM can sample, and why. */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "hv-glue/probe.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: viprof probe [--json]\n\n"
		   "Reports the hypervisor, how it virtualizes the PMU, which perf events can be counted\n"
		   "and sampled here (live perf_event_open tests), BPF availability, privileges and\n"
		   "steal time, and ends with a recommendation.\n\n"
		   "  --json     one JSON object with the same facts\n"
		   "  -h, --help this text\n\n"
		   "examples:\n  viprof probe\n  viprof probe --json | python3 -m json.tool\n");
}

int cmd_probe(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool json = false;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "viprof probe: unexpected argument '%s'; run 'viprof probe --help'\n", argv[optind]);
		return 2;
	}
	struct vp_probe *p = vp_probe__run();
	if (!p) {
		fprintf(stderr, "viprof probe: out of memory\n");
		return 1;
	}
	int r = json ? vp_probe__write_json(p, stdout) : vp_probe__write_text(p, stdout);
	vp_probe__free(p);
	if (r == 0 && fflush(stdout) != 0)
		r = -1;
	if (r) {
		fprintf(stderr, "viprof probe: cannot write the output (%s)\n", strerror(r < 0 ? -r : r));
		return 1;
	}
	return 0;
}
