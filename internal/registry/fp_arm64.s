#include "textflag.h"

// func getfp() unsafe.Pointer
//
// NOFRAME: the function sets up no frame of its own, so R29 still holds the caller's frame
// pointer.
TEXT ·getfp(SB),NOSPLIT|NOFRAME,$0-8
	MOVD	R29, ret+0(FP)
	RET
