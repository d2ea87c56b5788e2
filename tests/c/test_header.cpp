// tq.h from C++: included twice (the include guard) and called without a
// link error (extern "C"). Built with g++ -Wall -Wextra -Werror -pedantic.
#include <tq.h>
#include <tq.h>

#include <cstdio>
#include <cstring>

int main()
{
    if (std::strcmp(tq_version(), TQ_VERSION) != 0) {
        std::fprintf(stderr, "header is %s but the library is %s\n", TQ_VERSION, tq_version());
        return 1;
    }
    if (tq_version_number() != TQ_VERSION_NUMBER) {
        std::fprintf(stderr, "header is %d but the library is %u\n", TQ_VERSION_NUMBER, tq_version_number());
        return 1;
    }
    // The enums and opaque types are usable from C++ as declared.
    tq_status status = TQ_EMPTY;
    tq_queue *queue = nullptr;
    if (tq_open(nullptr, nullptr, &queue) != TQ_ERR_INVALID_ARGUMENT || queue != nullptr
        || std::strcmp(tq_status_str(status), "unknown status") == 0) {
        std::fprintf(stderr, "unexpected results through the C++ declarations\n");
        return 1;
    }
    tq_close(queue);
    std::printf("C++ header test: tq %s, header %s: ok\n", tq_version(), TQ_VERSION);
    return 0;
}
