// liburoce.so.0 is the core library whole; this file only gives the target a source.
