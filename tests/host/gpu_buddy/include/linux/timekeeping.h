/* nvrs host shim: see nvrs_buddy_shim.h */
