from django.shortcuts import render


def workbench(request):
    return render(request, "placeholder.html", {"title": "Workbench"})


def history(request):
    return render(request, "placeholder.html", {"title": "History"})

