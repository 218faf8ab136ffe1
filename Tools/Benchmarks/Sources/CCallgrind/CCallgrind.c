// The header alone (include/CCallgrind.h); SwiftPM wants a source file in a C target.
