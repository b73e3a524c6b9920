// cairo (Debian's libcairo2-dev): the recovery kits' PDF pages, their text (with the
// fonts fontconfig finds, fonts-dejavu-core on Debian) and their QR codes as vector squares.
#include <cairo.h>
#include <cairo-pdf.h>
