#pragma once
// Where the ranks run: every rank's host name, in rank order, as the run records its placement
// (hosts in network namespaces have names of their own, scripts/netns-rsh).
#include <string>
#include <vector>

#include "distributed/communicator.h"

namespace ts::distributed {

// Collective: every rank of `comm` calls it and gets the same list. Not recorded as communication.
std::vector<std::string> gather_host_names(Communicator& comm);

// Every rank's machine, in rank order: its kernel's boot id (/proc/sys/kernel/random/boot_id), which
// hosts in network namespaces on one machine share, so that ranks sharing cores are known.
// Collective, as gather_host_names.
std::vector<std::string> gather_machine_ids(Communicator& comm);
// The most ranks any one machine runs (1 for no ids).
int most_ranks_per_machine(const std::vector<std::string>& machine_ids);

// "tsh1 x2, tsh2 x2": the hosts in order of first rank, with their rank counts.
std::string describe_placement(const std::vector<std::string>& hosts);

}  // namespace ts::distributed
