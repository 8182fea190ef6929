/* Placeholder until the component lands. */
#include <stdio.h>
#include "cli/commands.h"
int cmd_attach(int argc, char **argv)
{
	fprintf(stderr, "viprof: '%s' is not built yet\n", argv[0]);
	return 1;
}
